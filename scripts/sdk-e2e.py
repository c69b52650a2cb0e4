#!/usr/bin/env python3
"""Typed clients end to end (issue 25, SPEC §18), against the real tools
and a live server, sending only to 127.0.0.1:

1. `helixor-pack sdk` generates the Python, Java and TypeScript clients of
   the demo packs, twice each: the same manifest must give the same bytes.
2. The real type checkers: `mypy --strict` (Python 3.9 rules), `javac
   -Xlint:all -Werror`, `tsc --strict` (installed into cached places: a
   virtualenv under target/sdk-venv, npm packages under target/sdk-npm; the
   JDK from the machine, else Debian's openjdk-17-jdk-headless).
3. `helixor-pack serve` on the demo deployment with a bearer token file and
   a 64 KiB body limit; each language's conformance program
   (scripts/sdk/conformance.{py,ts}, Conformance.java) runs the corpus
   below through its clients, and every member of every decision must equal
   the server's own JSON for the same request (`latency_us` aside, which
   differs per call), `blocked`/`redacted` must follow the severity, and
   401, 404 and 413 (a 2 MiB text, refused unread) must surface as the
   typed error with the server's name and status. A decision with an action and a rule id outside the enums
   must keep both as strings.

Usage: scripts/sdk-e2e.py [--bin PATH] [--only python,java,typescript]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "config/demo"
PACKS = ["regulatory_pii_guard", "internal_ids", "credentials_guard"]
MYPY = "mypy==1.20.2"
TYPESCRIPT = "typescript@5.9.3"
TOKEN = "sdk-e2e-token-0123456789abcdef"

TEXTS = {
    "compliance.regulatory_pii_guard.v1": [
        "Thanks, the order shipped on Tuesday.",
        "Reach me at jane.doe@example.com or (415) 555-0142.",
        "My SSN is 123-45-6789, card 4111 1111 1111 1111.",
        "MRN 00482913 and the IP 10.42.7.19 for the record.",
        "Überweisung an jane.doe@example.com — ok? 会议",
    ],
    "custom.internal_ids.v1": [
        "Nothing to see here.",
        "See TCK-004211 for the fix.",
        "Project PRJ-ALPHA-77 is confidential; ticket TCK-123456.",
        "ssn 123-45-6789",
    ],
    "compliance.credentials_guard.v1": [
        "No secrets in this one.",
        "password = hunter2-but-much-longer-Zq8x",
        "key AKIAIOSFODNN7EXAMPLE and secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "IBAN DE89 3704 0044 0532 0130 00, mail ops@example.com",
    ],
}


def run(argv, **kw):
    kw.setdefault("check", True)
    return subprocess.run([str(a) for a in argv], **kw)


def post(base, path, body, token=TOKEN):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def tools():
    """mypy, tsc and javac/java, installed where missing."""
    venv = ROOT / "target/sdk-venv"
    if not (venv / "bin/python").exists():
        run([sys.executable, "-m", "venv", venv])
    stamp = venv / ".sdk-requirements"
    if not stamp.exists() or stamp.read_text() != MYPY:
        run([venv / "bin/pip", "install", "--quiet", "--disable-pip-version-check", MYPY])
        stamp.write_text(MYPY)
    npm = ROOT / "target/sdk-npm"
    tsc = npm / "node_modules/.bin/tsc"
    npm_stamp = npm / ".sdk-requirements"
    if not tsc.exists() or not npm_stamp.exists() or npm_stamp.read_text() != TYPESCRIPT:
        npm.mkdir(parents=True, exist_ok=True)
        run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", npm, TYPESCRIPT])
        npm_stamp.write_text(TYPESCRIPT)
    if not shutil.which("javac"):
        run(["apt-get", "install", "-y", "-q", "openjdk-17-jdk-headless"])
    return venv / "bin/mypy", tsc


def generate(bin_, lang, out):
    args = [bin_, "sdk", "--lang", lang, "--out", out,
            "--license", DEMO / "license.hxlic", "--issuer-keys", DEMO / "issuer-keys"]
    for p in PACKS:
        args += ["--pack", DEMO / "packs" / f"{p}.hxpack"]
    run(args, stdout=subprocess.DEVNULL)


def tree(d):
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(Path(d).rglob("*")) if p.is_file()}


def corpus(base):
    cases = []
    for pid, texts in TEXTS.items():
        for t in texts:
            cases.append({"pack_id": pid, "text": t, "normalize": None})
    # The evasion view (SPEC §15): full-width digits in an SSN.
    cases.append({"pack_id": "compliance.regulatory_pii_guard.v1",
                  "text": "SSN １２３-４５-６７８９", "normalize": "evasion"})
    batches = [{"pack_id": pid, "texts": texts} for pid, texts in TEXTS.items()]
    pid = "custom.internal_ids.v1"
    errors = [
        {"pack_id": pid, "text": "x", "token": None, "base_url": None, "expect": ("UnauthorizedError", 401)},
        {"pack_id": pid, "text": "x", "token": "wrong", "base_url": None, "expect": ("UnauthorizedError", 401)},
        {"pack_id": pid, "text": "x", "token": TOKEN, "base_url": base + "/no/such/prefix",
         "expect": ("NotFoundError", 404)},
        {"pack_id": pid, "text": "a" * (2 << 20), "token": TOKEN, "base_url": None,
         "expect": ("PayloadTooLargeError", 413)},
    ]
    _, d = post(base, "/evaluate", {"text": "See TCK-004211 for the fix.", "pack_id": pid})
    d["action"] = "escalate_to_a_human"
    d["triggers"][0]["rule_id"] = "rule_of_a_newer_server"
    unknown = [{"pack_id": pid, "decision": d}]
    return {"token": TOKEN, "cases": cases, "batches": batches, "errors": errors, "unknown": unknown}


def compare(lang, lines, c, base):
    """Every typed decision equals the server's JSON; errors are typed."""
    bad = []

    def same(want, got, where):
        if "generation" not in want:
            want = dict(want)
        for k, v in want.items():
            if k == "latency_us":
                if not isinstance(got.get(k), (int, float)):
                    bad.append(f"{where}: latency_us {got.get(k)!r}")
                continue
            if k == "triggers":
                for t in v:
                    t.setdefault("codons", [])
            if got.get(k) != v:
                bad.append(f"{where}: {k}: server {v!r}, client {got.get(k)!r}")
        if got.get("normalized") != want.get("normalized", False):
            bad.append(f"{where}: normalized {got.get('normalized')!r}")
        sev = want["severity"]
        if (got["blocked"], got["redacted"]) != (sev == "FATAL", sev == "WARNING"):
            bad.append(f"{where}: blocked/redacted {got['blocked']}/{got['redacted']} for {sev}")

    by = {}
    for line in lines:
        by.setdefault(line["kind"], []).append(line)
    for i, case in enumerate(c["cases"]):
        body = {"text": case["text"], "pack_id": case["pack_id"]}
        if case["normalize"]:
            body["normalize"] = case["normalize"]
        _, want = post(base, "/evaluate", body)
        got = by["case"][i]["decision"]
        same(want, got, f"{lang} case {i}")
        if not got["action_known"] or not all(got["rule_ids_known"]):
            bad.append(f"{lang} case {i}: a server value outside the enums")
    for i, b in enumerate(c["batches"]):
        _, want = post(base, "/evaluate/batch",
                       {"items": [{"text": t, "pack_id": b["pack_id"]} for t in b["texts"]]})
        got = by["batch"][i]["decisions"]
        if len(got) != len(want["results"]):
            bad.append(f"{lang} batch {i}: {len(got)} decisions")
        for k, (w, g) in enumerate(zip(want["results"], got)):
            w["generation"] = want["generation"]
            same(w, g, f"{lang} batch {i} item {k}")
    for i, e in enumerate(c["errors"]):
        got = by["error"][i]
        if (got.get("name"), got.get("status")) != tuple(e["expect"]):
            bad.append(f"{lang} error {i}: expected {e['expect']}, got {got}")
        elif not got.get("message"):
            bad.append(f"{lang} error {i}: no message")
    for i, u in enumerate(c["unknown"]):
        got = by["unknown"][i]["decision"]
        if got["action"] != "escalate_to_a_human" or got["action_known"]:
            bad.append(f"{lang} unknown {i}: action {got['action']!r} known={got['action_known']}")
        if got["triggers"][0]["rule_id"] != "rule_of_a_newer_server" or got["rule_ids_known"][0]:
            bad.append(f"{lang} unknown {i}: rule id {got['triggers'][0]['rule_id']!r}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("HELIXOR_PACK", str(ROOT / "target/debug/helixor-pack")))
    ap.add_argument("--only", default="python,java,typescript")
    a = ap.parse_args()
    langs = a.only.split(",")
    bin_ = Path(a.bin).resolve()
    mypy, tsc = tools()
    work = Path(tempfile.mkdtemp(prefix="sdk-e2e-"))
    failures = []
    try:
        for lang in langs:
            out, again = work / lang, work / f"{lang}-again"
            generate(bin_, lang, out)
            generate(bin_, lang, again)
            if tree(out) != tree(again):
                failures.append(f"{lang}: two generations differ")
            print(f"generated {lang}: {len(tree(out))} files, deterministic")
        # The type checkers, on the generated code and the conformance programs.
        if "python" in langs:
            run([mypy, "--strict", "--python-version", "3.9", work / "python/helixor_clients"])
        if "java" in langs:
            classes = work / "java-classes"
            sources = sorted((work / "java/src").rglob("*.java"))
            run(["javac", "-Xlint:all", "-Werror", "-encoding", "UTF-8", "-d", classes, *sources,
                 ROOT / "scripts/sdk/Conformance.java"])
            print("javac -Xlint:all -Werror: clean")
        if "typescript" in langs:
            shutil.copy(ROOT / "scripts/sdk/conformance.ts", work / "typescript/src/conformance.ts")
            run([tsc, "-p", work / "typescript"])
            print("tsc --strict: clean")

        tokens = work / "tokens"
        tokens.write_text(TOKEN + "\n")
        env = {**os.environ, "HELIXOR_AUTH_TOKENS_FILE": str(tokens),
               "HELIXOR_LIMITS_MAX_BODY_BYTES": "65536", "HELIXOR_LOG_LEVEL": "warn",
               "HELIXOR_RELOAD_WATCH": "false"}
        server = subprocess.Popen([str(bin_), "serve", "--config", str(ROOT / "config/helixor.yaml"),
                                   "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, text=True, cwd=ROOT)
        try:
            line = server.stdout.readline()
            if not line.startswith("listening on "):
                raise SystemExit(f"the server did not start: {line!r}")
            base = "http://" + line.split()[-1]
            c = corpus(base)
            cfile = work / "corpus.json"
            cfile.write_text(json.dumps(c, ensure_ascii=False))
            programs = {
                "python": ([sys.executable, ROOT / "scripts/sdk/conformance.py", base, cfile],
                           {"PYTHONPATH": str(work / "python")}),
                "java": (["java", "-cp", work / "java-classes", "Conformance", base, cfile], {}),
                "typescript": (["node", work / "typescript/dist/conformance.js", base, cfile], {}),
            }
            for lang in langs:
                argv, extra = programs[lang]
                try:
                    p = run(argv, capture_output=True, text=True, timeout=120,
                            env={**os.environ, **extra}, check=False)
                except subprocess.TimeoutExpired as e:
                    out = (e.stdout or b"")[-2000:] if isinstance(e.stdout, bytes) else (e.stdout or "")[-2000:]
                    failures.append(f"{lang}: the conformance program did not finish within 120 s; it wrote:\n{out}")
                    continue
                if p.returncode != 0:
                    failures.append(f"{lang}: the conformance program failed ({p.returncode}):\n{p.stderr[-2000:]}")
                    continue
                lines = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
                bad = compare(lang, lines, c, base)
                failures += bad
                n = len(c["cases"]) + sum(len(b["texts"]) for b in c["batches"])
                print(f"{lang}: {n} decisions equal the server's, "
                      f"{len(c['errors'])} errors typed, unknown values kept" if not bad
                      else f"{lang}: {len(bad)} differences")
        finally:
            server.kill()
            server.wait()
    finally:
        if not failures:
            shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("FAIL", f)
    if failures:
        print(f"work directory kept: {work}")
        sys.exit(1)
    print("sdk-e2e: ok")


if __name__ == "__main__":
    main()
