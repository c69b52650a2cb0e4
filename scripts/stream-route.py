#!/usr/bin/env python3
"""The stream route's cost and its attacks (issue 27 rows 2, 6 and 9), on
real `helixor-pack serve` binaries, each on 127.0.0.1 with the demo
deployment (config/demo), several binaries compared in one run.

  scripts/stream-route.py cost BIN...   done.latency_us and wall time of
      POST /v1/evaluate/stream against /evaluate's latency_us, on 512 KiB of
      the benchmark's reply and of a reply dense with PII (one value every
      ~205 bytes), in pieces of 16 code points and in one piece (FATAL values
      redacted, not blocking, so that every piece is judged); requests to
      the binaries interleaved, ROUNDS rounds (default 7), medians.
  scripts/stream-route.py row6 BIN...   1 MiB of `1.1.…` runs of 60,000
      characters, one code point a piece: the server's CPU seconds, the
      wall time and done.latency_us.
  scripts/stream-route.py held BIN...   held runs of 1k, 10k and 60k
      characters (row 6's text with shorter runs) to 1 MiB, in pieces of 1
      and 16 code points: the server's CPU seconds per MiB (flat when the
      session is linear), ROUNDS rounds (default 3), medians.
  scripts/stream-route.py row2 BIN...   1,030 streams of 300 KB in pieces of
      one code point that are never read, held for HOLD seconds (default
      20): the server's peak RSS, and /evaluate and /healthz probed every
      100 ms (how many probes failed, the longest outage).

BIN is NAME=PATH (e.g. before=/tmp/base/helixor-pack). Sends only to
127.0.0.1. Needs the demo deployment of this tree (config/demo).
"""

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "config", "demo")
PACK = "compliance.regulatory_pii_guard.v1"

REPLY = (
    "Thanks for reaching out! I looked into ticket TCK-004211 and here is what I found.\n\n"
    "1. The invoice from March (total $1,284.50) was sent to billing@example.com on the 14th.\n"
    "2. Our records show the account was opened in 2019 and upgraded twice since then.\n"
    "3. If you need a copy, call our support line at (212) 555-0199 or reply to this message.\n\n"
    "The outage on the 3rd affected servers in two regions; 97.5% of requests were served normally. "
    "You can follow the status page for updates, and our team lead, Jane Doe (jane.doe@example.com), "
    "will follow up by Friday. Let me know if anything else is unclear. "
)

# The same sentences as DENSE in benches/stream.rs.
DENSE = (
    "Following up on your request from this morning, I checked the account history and the billing notes, and the primary contact on file is maria.lopez@example.org, the address our system uses for renewal notices and invoices from now on. "
    "When the migration finished, the escalation desk asked that any urgent question about the cut-over goes to the on-call line at (415) 555-0142 instead of the shared mailbox, which is read only twice a day by the team. "
    "The failing health check in last night's report came from the host at 10.42.7.19, which had been taken out of the pool for maintenance but was still listed in the load balancer's configuration file. "
    "I have merged the duplicate reports into ticket TCK-104233 so that the whole history stays in one place, and linked the earlier conversation with the vendor about the replacement hardware and its delivery. "
    "The form the applicant sent back still shows the number 123-45-6789 in the free-text field, although the instructions ask people not to write it there; the intake team has been told to correct the template. "
    "For the refund, the payment was made with the card ending in the number 4111 1111 1111 1111 according to the processor's log, and the reversal should appear within five to seven business days. "
    "The clinic's letter refers to the patient by MRN 00482913 and asks for the imaging results from the spring visit, which we cannot release without the signed authorisation form from the patient. "
    "The promotional voucher 4532-0151-1283 was applied twice to the same order because of a retry in the checkout service; finance will reverse the second use and the customer keeps the first discount. "
)


def fill(unit, size):
    return (unit * (size // len(unit) + 1))[:size]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, name, path, extra=""):
        self.name = name
        self.port = free_port()
        self.dir = f"/tmp/stream-route-{os.getpid()}-{name}"
        os.makedirs(self.dir, exist_ok=True)
        # The example pack alone: a "before" binary older than [§16](docs/codons.md#s16)
        # refuses the demo's version-2 pack, as it should.
        packs = os.path.join(self.dir, "packs")
        os.makedirs(packs, exist_ok=True)
        shutil.copy(f"{DEMO}/packs/regulatory_pii_guard.hxpack", packs)
        cfg = os.path.join(self.dir, "helixor.yaml")
        with open(cfg, "w") as f:
            f.write(
                f"listen: 127.0.0.1:{self.port}\nlicense: {DEMO}/license.hxlic\n"
                f"issuer_keys: {DEMO}/issuer-keys\npacks_dir: {packs}\n"
                f"default_pack: {PACK}\nreload:\n  watch: false\n{extra}"
            )
        env = {k: v for k, v in os.environ.items() if not k.startswith("HELIXOR_")}
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        self.proc = subprocess.Popen(
            [path, "serve", "--config", cfg],
            stdout=subprocess.PIPE, stderr=self.log, env=env, text=True,
        )
        for line in self.proc.stdout:
            if line.startswith("listening on"):
                break
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def post(port, path, body, timeout=120):
    """One request on a new connection; (status, body bytes)."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(
        f"POST {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data
    )
    chunks = []
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        chunks.append(b)
    s.close()
    raw = b"".join(chunks)
    head, _, rest = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, rest


def done_of(body):
    last = None
    for line in body.split(b"\n"):
        if line.startswith(b"data: {") and b'"done":true' in line:
            last = json.loads(line[6:])
    return last


def cost(bins, rounds):
    servers = [Server(n, p) for n, p in bins]
    # FATAL values redacted, not blocking: the dense text has an SSN in its
    # first kilobyte, and a blocked session judges the rest in one piece.
    texts = [("reply", fill(REPLY, 512 * 1024)), ("dense", fill(DENSE, 512 * 1024))]
    rows = {}
    try:
        for _ in range(rounds):
            for tname, text in texts:
                for srv in servers:
                    _, b = post(srv.port, "/evaluate", {"text": text})
                    ev = json.loads(b[b.index(b"{"): b.rindex(b"}") + 1])["latency_us"]
                    rows.setdefault((srv.name, tname, "eval"), []).append((ev, ev))
                    for chunk in (16, 1 << 20):
                        t0 = time.perf_counter()
                        _, b = post(srv.port, "/v1/evaluate/stream",
                                    {"text": text, "chunk_size": chunk, "block_on_fatal": False})
                        wall = (time.perf_counter() - t0) * 1e6
                        d = done_of(b)
                        rows.setdefault((srv.name, tname, chunk), []).append((d["latency_us"], wall))
    finally:
        for s in servers:
            s.stop()
    print(f"512 KiB, {rounds} rounds, medians; load {open('/proc/loadavg').read().split()[:3]}")
    # (x): the median over the median of /evaluate; [x]: the median of each
    # round's ratio (the stream against the evaluation just before it).
    print("| binary | text | /evaluate latency_us | stream, 16 code points: done.latency_us (x) [x] | wall | stream, one piece: done.latency_us (x) [x] | wall |")
    for srv in servers:
        for tname, _ in texts:
            evs = [l for l, _ in rows[(srv.name, tname, "eval")]]
            ev = statistics.median(evs)
            cells = []
            for chunk in (16, 1 << 20):
                lat = statistics.median(l for l, _ in rows[(srv.name, tname, chunk)])
                wall = statistics.median(w for _, w in rows[(srv.name, tname, chunk)])
                per = statistics.median(l / e for (l, _), e in zip(rows[(srv.name, tname, chunk)], evs))
                cells.append(f"{lat / 1e3:.2f} ms ({lat / ev:.2f}x) [{per:.2f}x] | {wall / 1e3:.1f} ms")
            print(f"| {srv.name} | {tname} | {ev / 1e3:.2f} ms | " + " | ".join(cells) + " |")


def row6(bins):
    # 1 MiB of body: the text and its JSON wrapper (a longer body is a 413).
    text = fill(("1." * 30000) + " ", (1 << 20) - 64)
    print("| binary | server CPU | wall | done.latency_us | done.action |")
    for name, path in bins:
        srv = Server(name, path)
        try:
            c0 = srv.cpu_seconds()
            t0 = time.perf_counter()
            _, b = post(srv.port, "/v1/evaluate/stream", {"text": text, "chunk_size": 1}, timeout=600)
            wall = time.perf_counter() - t0
            cpu = srv.cpu_seconds() - c0
            d = done_of(b)
            print(f"| {name} | {cpu:.2f} s | {wall:.2f} s | {d['latency_us'] / 1e6:.3f} s | {d['action']} |")
        finally:
            srv.stop()


def held(bins, rounds):
    """Issue 27 row 6 on the route: held runs of 1k, 10k and 60k characters
    (`1.1.…`, a space after each run) to 1 MiB of body, in pieces of 1 and
    16 code points; the server's CPU seconds per MiB of text, requests to
    the binaries interleaved, medians of ROUNDS rounds."""
    size = (1 << 20) - 64
    runs = (1_000, 10_000, 60_000)
    chunks = (1, 16)
    servers = [Server(n, p) for n, p in bins]
    rows = {}
    try:
        for _ in range(rounds):
            for run in runs:
                text = fill(("1." * (run // 2)) + " ", size)
                for chunk in chunks:
                    for srv in servers:
                        c0 = srv.cpu_seconds()
                        t0 = time.perf_counter()
                        st, b = post(srv.port, "/v1/evaluate/stream",
                                     {"text": text, "chunk_size": chunk}, timeout=600)
                        wall = time.perf_counter() - t0
                        cpu = srv.cpu_seconds() - c0
                        d = done_of(b) if st == 200 else None
                        lat = d["latency_us"] / 1e6 if d else float("nan")
                        rows.setdefault((srv.name, run, chunk), []).append((cpu, wall, lat))
    finally:
        for s in servers:
            s.stop()
    mib = size / (1 << 20)
    print(f"{size} B of text, {rounds} rounds, medians; load {open('/proc/loadavg').read().split()[:3]}")
    print("| binary | held run | pieces | server CPU per MiB | wall | done.latency_us |")
    for srv in servers:
        for run in runs:
            for chunk in chunks:
                r = rows[(srv.name, run, chunk)]
                cpu = statistics.median(c for c, _, _ in r)
                wall = statistics.median(w for _, w, _ in r)
                lat = statistics.median(l for _, _, l in r)
                print(f"| {srv.name} | {run:,} | {chunk} code point{'s' if chunk > 1 else ''} | "
                      f"{cpu / mib:.2f} s | {wall:.2f} s | {lat:.3f} s |")


def row2(bins, hold):
    text = fill("Hello there, this is a long answer with nothing to hide. ", 300_000)
    body = json.dumps({"text": text, "chunk_size": 1}).encode()
    req = (
        f"POST /v1/evaluate/stream HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode() + body
    )
    print("| binary | peak RSS | /evaluate probes failed | longest /evaluate outage | /healthz probes failed |")
    for name, path in bins:
        srv = Server(name, path)
        base = srv.rss_kib()
        peak = [base]
        probes = {"/evaluate": [], "/healthz": []}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], srv.rss_kib())
                time.sleep(0.05)

        def probe():
            while not stop.is_set():
                for path_ in probes:
                    t0 = time.perf_counter()
                    try:
                        if path_ == "/evaluate":
                            st, _ = post(srv.port, path_, {"text": "mail ops@example.com"}, timeout=2)
                        else:
                            s = socket.create_connection(("127.0.0.1", srv.port), timeout=2)
                            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                            st = int(s.recv(64).split(b" ", 2)[1])
                            s.close()
                    except OSError:
                        st = 0
                    probes[path_].append((t0, st == 200))
                time.sleep(0.1)

        threads = [threading.Thread(target=sample), threading.Thread(target=probe)]
        for t in threads:
            t.start()
        socks = []
        try:
            for _ in range(1030):
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
                s.sendall(req)
                socks.append(s)
            time.sleep(hold)
        finally:
            stop.set()
            for t in threads:
                t.join()
            for s in socks:
                s.close()
            srv.stop()
        cells = []
        for path_ in ("/evaluate", "/healthz"):
            ok = probes[path_]
            failed = sum(1 for _, good in ok if not good)
            longest, start = 0.0, None
            for t, good in ok:
                if not good and start is None:
                    start = t
                if good and start is not None:
                    longest, start = max(longest, t - start), None
            if start is not None:
                longest = max(longest, ok[-1][0] - start)
            cells.append((failed, len(ok), longest))
        (ef, en, el), (hf, hn, _) = cells
        print(f"| {name} | {peak[0] / 1024:.0f} MiB (from {base / 1024:.0f}) | {ef} of {en} | {el:.1f} s | {hf} of {hn} |")


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("cost", "row6", "held", "row2"):
        print(__doc__)
        sys.exit(2)
    bins = [tuple(b.split("=", 1)) for b in sys.argv[2:]]
    if sys.argv[1] == "cost":
        cost(bins, int(os.environ.get("ROUNDS", "7")))
    elif sys.argv[1] == "row6":
        row6(bins)
    elif sys.argv[1] == "held":
        held(bins, int(os.environ.get("ROUNDS", "3")))
    else:
        row2(bins, float(os.environ.get("HOLD", "20")))


if __name__ == "__main__":
    main()
