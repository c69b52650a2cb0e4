#!/usr/bin/env python3
"""End-to-end test of the LiteLLM integration (issue 8, [§12.1](docs/gateways.md#s12-1)).

Starts, on 127.0.0.1 only: `helixor-pack serve` (the demo deployment, with a
tokens file and a packs directory of its own: the demo packs and
custom.agent_guard.v1, compiled from scripts/e2e/agent_guard.yaml with the
demo license, which adds API keys and AWS access key ids to the built-in
rules), a fake OpenAI-compatible upstream that records what it receives, a
LiteLLM proxy whose guardrail block is the README's (with that pack), and a
second LiteLLM proxy without guardrails (the latency baseline). Then checks,
through LiteLLM's /v1/chat/completions:

1. an e-mail in a prompt reaches the model redacted;
2. an SSN in a prompt gets HTTP 400, the model is never called, and the
   error quotes nothing of the SSN;
3. an e-mail in a non-streamed reply reaches the client redacted;
4. a streamed reply with e-mails cut at random places (several trials) reaches
   the client as exactly the redacted reply, no chunk holding a fragment;
5. an SSN mid-stream never reaches the client;
6. a tool result (a tool message holding JSON) with an SSN gets HTTP 400,
   the model is never called, nothing of it is quoted;
7. a tool result with an e-mail and an API key, after a tool call whose
   arguments hold an AWS key id, reaches the model with all three redacted:
   LiteLLM puts the `structured_messages` the service returns in place of
   the messages (only they can carry the arguments back);
8. a reply that is a tool call with an e-mail and an API key in its
   arguments is BLOCKED (LiteLLM takes no tool call back): HTTP 400, the
   client sees nothing of it;
9. the same tool call streamed ends the stream with the BLOCKED error
   event, quoting nothing. LiteLLM 1.108.7 (incremental_diff) passes tool
   call chunks through as they come and asks the guardrail about them once,
   at the end: what reached the client before is printed as a `known` line;
10. with the service stopped, LiteLLM fails closed.

and measures the latency the guardrail adds (median and p99, interleaved
requests to both proxies). Every process it starts is stopped at the end.

    litellm_e2e.py --litellm VENV/bin/litellm --helixor target/debug/helixor-pack
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness import AGENT_PACK, Procs, agent_packs, free_port  # beside this file

ROOT = Path(__file__).resolve().parents[2]
MASTER_KEY = "sk-helixor-e2e-" + "0123456789abcdef" * 3
GUARD_TOKEN = "helixor-e2e-guard-token"
PACK = AGENT_PACK
SSN_RULE = "RULE-GLBA-SSN-BLOCK"

# The agent exchange (custom.agent_guard.v1: scripts/e2e/agent_guard.yaml).
SSN = "123-45-6789"
API_KEY = "sk-live-4fZ8qL2mN7pR1sT6vX9yB3cD5eG0hJ"
AWS_KEY = "AKIA2QX7M4KJ9TW3ZB6R"
AGENT_EMAIL = "jane.doe@mailbox.org"
AGENT_REDACTIONS = ((AGENT_EMAIL, "[REDACTED_EMAIL]"), (API_KEY, "[REDACTED_API_KEY]"),
                    (AWS_KEY, "[REDACTED_AWS_ACCESS_KEY_ID]"))
TOOL = "crm_lookup"
TOOL_CALL_ID = f"call_{TOOL}"
AGENT_USER = "Look up customer C-1042 and send her the new key. REPLY:Done."
AGENT_ARGS = json.dumps({"customer_id": "C-1042"})
# Tool results as their tool serialised them (json.dumps).
SSN_RESULT = json.dumps({"customer_id": "C-1042", "name": "Jane Doe", "ssn": SSN, "api_key": API_KEY})
REDACT_RESULT = json.dumps({"customer_id": "C-1042", "name": "Jane Doe", "email": AGENT_EMAIL, "api_key": API_KEY})
REDACT_ARGS = json.dumps({"customer_id": "C-1042", "revoke_key_id": AWS_KEY})
# A reply that is a tool call, its arguments holding an e-mail and an API key.
TOOL_ARGS = json.dumps({"to": AGENT_EMAIL, "subject": "Your new key", "api_key": API_KEY,
                        "body": "Rotate it within a week."})
# What the service says when a reply's tool call would need redacting.
TOOL_CALL_BLOCKED = "a tool call would need redacting and LiteLLM cannot take one back"
# Fragments a client must never see: every 4-character window of the e-mail's
# parts and of the API key, every 3-character window of the SSN.
TOOL_FRAGMENTS = ({part[i:i + 4] for part in AGENT_EMAIL.split("@") for i in range(len(part) - 3)}
                  | {API_KEY[i:i + 4] for i in range(len(API_KEY) - 3)})
SSN_FRAGMENTS = {SSN[i:i + 3] for i in range(len(SSN) - 2)}


def agent_redacted(text: str) -> str:
    """`text` with the agent exchange's e-mail and credentials replaced by their tokens."""
    for value, token in AGENT_REDACTIONS:
        text = text.replace(value, token)
    return text

# The README's block ("Using it with LiteLLM"), with the service's address
# and the e2e pack (the demo's rules plus credentials).
GUARDRAILS = """
guardrails:
  - guardrail_name: helixor
    litellm_params:
      guardrail: generic_guardrail_api
      mode: [pre_call, post_call]
      api_base: http://{helixor}
      api_key: os.environ/HELIXOR_GUARDRAIL_TOKEN
      default_on: true
      unreachable_fallback: fail_closed
      streaming_transform_mode: incremental_diff
      streaming_sampling_rate: 1
      additional_provider_specific_params:
        pack_id: {pack}
"""

MODEL = """
model_list:
  - model_name: fake
    litellm_params:
      model: openai/fake
      api_base: http://{upstream}/v1
      api_key: fake-upstream-key
"""

failures: list[str] = []


def check(ok: bool, what: str, detail: str = "") -> None:
    print(("ok   " if ok else "FAIL ") + what + ("" if ok or not detail else f": {detail}"), flush=True)
    if not ok:
        failures.append(what)


def request(port: int, method: str, path: str, body=None, timeout: float = 60):
    """(status, headers, body bytes) of one HTTP/1.1 request to 127.0.0.1."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {MASTER_KEY}"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    raw = r.read()
    conn.close()
    return r.status, dict(r.getheaders()), raw


def wait_ready(port: int, procs: Procs, name: str, timeout: float = 180) -> float:
    started = time.time()
    while time.time() - started < timeout:
        if procs.procs[name].poll() is not None:
            break
        try:
            status, _, _ = request(port, "GET", "/health/liveliness", timeout=2)
            if status == 200:
                return time.time() - started
        except OSError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{name} not ready:\n" + (procs.work / f"{name}.err").read_text()[-5000:])


def chat(port: int, prompt: str, stream: bool = False):
    body = {"model": "fake", "messages": [{"role": "user", "content": prompt}]}
    if stream:
        body["stream"] = True
    return request(port, "POST", "/v1/chat/completions", body)


def reply_prompt(reply: str, cuts: list[int] | None = None, extra: str = "") -> str:
    """A prompt that makes the fake upstream answer `reply` (base64, so the
    prompt guardrail does not see it), streamed in pieces cut at `cuts`."""
    control = f"CUTS:{','.join(map(str, cuts))} " if cuts else ""
    return f"Answer please. {extra}{control}REPLY64:" + base64.b64encode(reply.encode()).decode()


def agent_chat(result: str, arguments: str = AGENT_ARGS) -> dict:
    """A chat request: the user's request, the assistant's tool call, the tool's result."""
    return {"model": "fake", "messages": [
        {"role": "user", "content": AGENT_USER},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": TOOL_CALL_ID, "type": "function", "function": {"name": TOOL, "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": TOOL_CALL_ID, "content": result}]}


def sse_events(raw: bytes) -> list:
    events = []
    for line in raw.decode().splitlines():
        if line.startswith("data: "):
            data = line[len("data: "):]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def contents(events: list) -> list[str]:
    out = []
    for e in events:
        if isinstance(e, dict):
            for c in e.get("choices") or []:
                piece = (c.get("delta") or {}).get("content")
                if piece:
                    out.append(piece)
    return out


def error_message(text: str) -> str | None:
    """`error.message` of a JSON error body, or None."""
    try:
        return json.loads(text)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return None


def upstream_bodies(record: Path) -> list[dict]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def served_time(helixor: str) -> tuple[float, float]:
    """(seconds, requests) the service spent on guardrail calls, from its /metrics."""
    host, port = helixor.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    total = {"sum": 0.0, "count": 0.0}
    for line in text.splitlines():
        for kind in total:
            prefix = f'helixor_http_request_duration_seconds_{kind}{{route="/beta/litellm_basic_guardrail_api"}} '
            if line.startswith(prefix):
                total[kind] = float(line[len(prefix):])
    return total["sum"], total["count"]


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--litellm", required=True, help="the venv's litellm executable")
    ap.add_argument("--helixor", required=True, help="the helixor-pack binary")
    ap.add_argument("--trials", type=int, default=8, help="random chunkings per streamed reply")
    ap.add_argument("--latency-requests", type=int, default=200, help="requests per proxy for the latency report")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="helixor-litellm-e2e-"))
    procs = Procs(work)
    try:
        return run(args, rng, work, procs)
    finally:
        procs.stop_all()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work directory kept: {work}")


def run(args, rng: random.Random, work: Path, procs: Procs) -> int:
    tokens = work / "tokens"
    tokens.write_text(GUARD_TOKEN + "\n")
    procs.start("helixor", [str(Path(args.helixor).resolve()), "serve",
                            "--config", str(ROOT / "config/helixor.yaml"), "--listen", "127.0.0.1:0"],
                env={"HELIXOR_AUTH_TOKENS_FILE": str(tokens), "HELIXOR_LOG_LEVEL": "warn",
                     "HELIXOR_RELOAD_WATCH": "false", **agent_packs(args.helixor, work)})
    helixor = procs.listening("helixor")
    record = work / "upstream.jsonl"
    procs.start("upstream", [sys.executable, str(ROOT / "scripts/e2e/fake_openai.py"),
                             "--port", "0", "--record", str(record), "--quiet"])
    upstream = procs.listening("upstream")

    guarded, plain = free_port(), free_port()
    (work / "guarded.yaml").write_text(MODEL.format(upstream=upstream) + GUARDRAILS.format(helixor=helixor, pack=PACK))
    (work / "plain.yaml").write_text(MODEL.format(upstream=upstream))
    proxies = [("guarded", guarded), ("plain", plain)]
    env = {"LITELLM_MASTER_KEY": MASTER_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "HELIXOR_GUARDRAIL_TOKEN": GUARD_TOKEN, "LITELLM_LOG": "ERROR"}
    for name, port in proxies:
        procs.start(name, [args.litellm, "--config", str(work / f"{name}.yaml"),
                           "--host", "127.0.0.1", "--port", str(port)], env=env)
    for name, port in proxies:
        print(f"{name} proxy ready in {wait_ready(port, procs, name):.1f} s", flush=True)

    # 1. An e-mail in a prompt reaches the model redacted.
    before = len(upstream_bodies(record))
    status, _, raw = chat(guarded, "Please write to jane.doe@example.com about it. REPLY:Noted.")
    sent = upstream_bodies(record)[before:]
    got = sent[-1]["messages"][-1]["content"] if sent else None
    check(status == 200 and got == "Please write to [REDACTED_EMAIL] about it. REPLY:Noted.",
          "1. an e-mail in a prompt reaches the model redacted", f"{status} {got!r} {raw[:300]!r}")

    # 2. An SSN in a prompt: 400, the model never called, nothing of the SSN quoted.
    before = len(upstream_bodies(record))
    status, _, raw = chat(guarded, "My SSN is 123-45-6789, file it. REPLY:ok")
    called = len(upstream_bodies(record)) - before
    text = raw.decode(errors="replace")
    message = error_message(text)
    check(status == 400 and called == 0 and SSN_RULE in (message or "")
          and not any(f in text for f in ("123-45", "45-6789", "6789", "123")),
          "2. an SSN in a prompt is HTTP 400, the model is not called, no part of it is quoted",
          f"{status} called={called} {text[:300]}")

    # 3. An e-mail in a non-streamed reply reaches the client redacted.
    status, _, raw = chat(guarded, reply_prompt("Contact jane.doe@example.com for access."))
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError):
        content = None
    check(status == 200 and content == "Contact [REDACTED_EMAIL] for access.",
          "3. an e-mail in a non-streamed reply reaches the client redacted", f"{status} {raw[:300]!r}")

    # 4. Streamed replies cut at random places: exactly the redacted reply, no fragment.
    reply = ("Sure! Write to jane.doe@example.com, or to ops-team@corp.example.org if it is "
             "urgent. Thanks, Jane")
    want = "Sure! Write to [REDACTED_EMAIL], or to [REDACTED_EMAIL] if it is urgent. Thanks, Jane"
    fragments = ["jane.", "doe", "example", "ops-", "team", "corp", "@", ".org", ".com"]
    n = len(reply)
    plans = [list(range(1, n))]  # one code point a chunk
    for _ in range(args.trials):
        plans.append(sorted(rng.sample(range(1, n), rng.randint(2, 12))))
    bad = []
    for cuts in plans:
        status, _, raw = chat(guarded, reply_prompt(reply, cuts), stream=True)
        events = sse_events(raw)
        pieces = contents(events)
        leaked = [p for p in pieces if any(f in p for f in fragments)]
        # One code point a chunk: the text must flow, not arrive all at the end.
        trickle = len(cuts) < n - 1 or len(pieces) >= 10
        if status != 200 or "".join(pieces) != want or leaked or events[-1:] != ["[DONE]"] or not trickle:
            bad.append(f"cuts={cuts} status={status} pieces={pieces} leaked={leaked}")
    check(not bad, f"4. {len(plans)} streamed replies, cut at random, reach the client exactly redacted",
          "; ".join(bad)[:2000])

    # 5. An SSN mid-stream never reaches the client.
    reply = "Your file lists 123-45-6789 as the number on record."
    start = reply.index("123")
    bad = []
    for k in range(args.trials):
        cuts = sorted({rng.randint(1, start), rng.randint(start + 1, start + 10), rng.randint(start + 11, len(reply) - 1)})
        status, _, raw = chat(guarded, reply_prompt(reply, cuts), stream=True)
        text = raw.decode(errors="replace")
        if status == 200:
            events = sse_events(raw)
            shown = "".join(contents(events))
            errors = [e["error"].get("message", "") for e in events if isinstance(e, dict) and "error" in e]
        else:
            shown = ""
            message = error_message(text)
            errors = [] if message is None else [message]
        leaked = any(ch.isdigit() for ch in shown) or any("123" in e or "6789" in e for e in errors)
        blocked = status in (200, 400) and any(SSN_RULE in e for e in errors)
        if leaked or not blocked or not reply.startswith(shown):
            bad.append(f"cuts={cuts} status={status} shown={shown!r} errors={errors}")
    check(not bad, "5. an SSN mid-stream never reaches the client, the stream ends blocked", "; ".join(bad)[:2000])

    # The agent exchange: a tool call and its result, on the way in and out.
    # 6. A tool result with an SSN (and an API key): 400, the model never called.
    before = len(upstream_bodies(record))
    status, _, raw = request(guarded, "POST", "/v1/chat/completions", agent_chat(SSN_RESULT))
    called = len(upstream_bodies(record)) - before
    text = raw.decode(errors="replace")
    message = error_message(text)
    leaked = [f for f in SSN_FRAGMENTS | TOOL_FRAGMENTS if f in text]
    check(status == 400 and called == 0 and SSN_RULE in (message or "") and not leaked,
          "6. a tool result with an SSN is HTTP 400, the model is not called, nothing of it is quoted",
          f"{status} called={called} leaked={leaked} {text[:300]}")

    # 7. A tool result with an e-mail and an API key, after a tool call whose
    # arguments hold an AWS key id: the model gets them redacted. Only the
    # rows (structured_messages) can carry the arguments back: LiteLLM's
    # texts are the messages' contents.
    before = len(upstream_bodies(record))
    status, _, raw = request(guarded, "POST", "/v1/chat/completions", agent_chat(REDACT_RESULT, REDACT_ARGS))
    sent = upstream_bodies(record)[before:]
    got = sent[-1].get("messages") if sent else None
    try:
        reply = json.loads(raw)["choices"][0]["message"]["content"]
        tool_row, call = got[2], got[1]["tool_calls"][0]
        rows_ok = (len(got) == 3 and got[0] == {"role": "user", "content": AGENT_USER}
                   and tool_row.get("role") == "tool" and tool_row.get("tool_call_id") == TOOL_CALL_ID
                   and tool_row.get("content") == agent_redacted(REDACT_RESULT)
                   and call.get("id") == TOOL_CALL_ID and call["function"]["name"] == TOOL
                   and call["function"]["arguments"] == agent_redacted(REDACT_ARGS))
    except (ValueError, KeyError, IndexError, TypeError):
        reply, rows_ok = None, False
    seen = json.dumps(sent, ensure_ascii=False)
    leaked = [v for v, _ in AGENT_REDACTIONS if v in seen]
    check(status == 200 and len(sent) == 1 and rows_ok and not leaked and reply == "Done.",
          "7. a tool result's e-mail and API key and a tool call's AWS key id reach the model redacted "
          "(LiteLLM takes the rows back)", f"{status} calls={len(sent)} leaked={leaked} messages={got!r} {raw[:300]!r}")

    # 8. A reply that is a tool call with an e-mail and an API key in its
    # arguments: BLOCKED (LiteLLM takes no tool call back), a 400 quoting nothing.
    before = len(upstream_bodies(record))
    status, _, raw = chat(guarded, reply_prompt(TOOL_ARGS, extra=f"TOOLCALL:{TOOL} "))
    called = len(upstream_bodies(record)) - before
    text = raw.decode(errors="replace")
    message = error_message(text)
    leaked = [f for f in TOOL_FRAGMENTS if f in text]
    check(status == 400 and called == 1 and TOOL_CALL_BLOCKED in (message or "") and not leaked,
          "8. a reply's tool call with an e-mail and an API key is HTTP 400 (BLOCKED), the client sees nothing of it",
          f"{status} called={called} leaked={leaked} {text[:400]}")

    # 9. The same tool call streamed. LiteLLM 1.108.7 (incremental_diff)
    # transforms only text: it passes tool call chunks through as they come
    # and asks the guardrail about them once, at the end of the stream. The
    # BLOCKED verdict ends the stream with an error event; what LiteLLM let
    # through before it is printed as a note (helixor is not asked earlier).
    cuts = sorted(rng.sample(range(1, len(TOOL_ARGS)), 8))
    status, _, raw = chat(guarded, reply_prompt(TOOL_ARGS, cuts, extra=f"TOOLCALL:{TOOL} "), stream=True)
    events = sse_events(raw) if status == 200 else []
    errors = [e["error"].get("message", "") for e in events if isinstance(e, dict) and "error" in e]
    arguments = "".join(
        (call.get("function") or {}).get("arguments") or ""
        for e in events if isinstance(e, dict) for c in e.get("choices") or []
        for call in (c.get("delta") or {}).get("tool_calls") or [])
    shown = [f for f in sorted(TOOL_FRAGMENTS) if f in arguments]
    quoted = [f for f in TOOL_FRAGMENTS if any(f in e for e in errors)]
    check(status == 200 and len(errors) == 1 and TOOL_CALL_BLOCKED in errors[0] and not quoted
          and events[-1:] != ["[DONE]"],
          "9. a streamed reply's tool call with an e-mail and an API key ends the stream with the BLOCKED "
          "error event, quoting nothing of it", f"{status} errors={errors} quoted={quoted} {raw[-600:]!r}")
    print(f"known LiteLLM 1.108.7 limitation: it streamed the tool call's arguments before asking the guardrail: "
          f"{arguments!r} reached the client ({len(shown)} fragments of the e-mail and API key)", flush=True)

    # Latency: the same clean request through both proxies, interleaved.
    prompt = "Summarise our refund policy in one line. REPLY:Refunds are issued within 14 days of a request."
    ports = [port for _, port in proxies]
    for port in ports:
        for _ in range(10):
            chat(port, prompt)
    times: dict[int, list[float]] = {port: [] for port in ports}
    served_before = served_time(helixor)
    for _ in range(args.latency_requests):
        for port in ports:
            t0 = time.perf_counter()
            status, _, _ = chat(port, prompt)
            times[port].append((time.perf_counter() - t0) * 1000)
            if status != 200:
                failures.append(f"latency request got {status}")
    g, p = times[guarded], times[plain]
    report = {
        "requests_per_proxy": args.latency_requests,
        "with_guardrail_ms": {"median": round(statistics.median(g), 2), "p99": round(percentile(g, 99), 2)},
        "without_ms": {"median": round(statistics.median(p), 2), "p99": round(percentile(p, 99), 2)},
        "added_median_ms": round(statistics.median(g) - statistics.median(p), 2),
        "added_p99_ms": round(percentile(g, 99) - percentile(p, 99), 2),
    }
    served_after = served_time(helixor)
    calls = served_after[1] - served_before[1]
    if calls:
        # What the service itself spent per guardrail call (its own histogram).
        report["service_mean_us_per_call"] = round((served_after[0] - served_before[0]) / calls * 1e6, 1)
        report["guardrail_calls"] = int(calls)
    print("latency " + json.dumps(report), flush=True)

    # 10. The service stopped: LiteLLM fails closed, the model is not called.
    procs.stop("helixor")
    before = len(upstream_bodies(record))
    status, _, raw = chat(guarded, "Hello there. REPLY:Hi!")
    called = len(upstream_bodies(record)) - before
    check(status >= 500 and called == 0 and b"Generic Guardrail API failed" in raw,
          "10. with the service stopped, LiteLLM fails closed", f"{status} called={called} {raw[:300]!r}")

    print(f"{len(failures)} failed" if failures else "all LiteLLM end-to-end checks passed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
