"""Shared pieces of the end-to-end drivers (scripts/e2e/*_e2e.py): free
loopback ports, the processes a test starts, each with its stdout and
stderr in the work directory, stopped with its whole process group, and the
packs the service serves (the demo's plus scripts/e2e/agent_guard.yaml).
Standard library only."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "config/demo"
# The e2e default pack: the demo's built-in rules plus credentials.
AGENT_PLAYBOOK = Path(__file__).resolve().parent / "agent_guard.yaml"
AGENT_PACK = "custom.agent_guard.v1"


def agent_packs(helixor: str, work: Path) -> dict[str, str]:
    """Compile scripts/e2e/agent_guard.yaml with the demo license into
    WORK/packs, beside copies of config/demo/packs/*.hxpack, sign them all
    with a signer of this run, and return the variables that make
    `helixor-pack serve --config config/helixor.yaml` serve that directory
    with the agent pack as default_pack, trusting that signer."""
    packs = work / "packs"
    packs.mkdir()
    for pack in sorted((DEMO / "packs").glob("*.hxpack")):
        shutil.copy(pack, packs / pack.name)
    p = subprocess.run([str(Path(helixor).resolve()), "compile", "--playbook", str(AGENT_PLAYBOOK),
                        "--license", str(DEMO / "license.hxlic"), "--issuer-keys", str(DEMO / "issuer-keys"),
                        "--out", str(packs / "agent_guard.hxpack")],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise RuntimeError(f"compiling {AGENT_PLAYBOOK} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    # config/helixor.yaml trusts only the demo's pack signer (SPEC §17), whose
    # secret half is gone: sign every pack here with a signer of this run and
    # trust that one instead.
    signers = work / "pack-signers"
    signers.mkdir()
    run = lambda *argv: subprocess.run([str(Path(helixor).resolve()), *argv], capture_output=True,
                                       text=True, timeout=60, stdin=subprocess.DEVNULL, check=True)
    run("license", "keygen", "--key-id", "e2e-signer", "--out", str(work / "signer-keys"))
    shutil.copy(work / "signer-keys" / "e2e-signer.pub", signers / "e2e-signer.pub")
    for pack in sorted(packs.glob("*.hxpack")):
        run("sign", str(pack), "--key", str(work / "signer-keys" / "e2e-signer.key"))
    return {"HELIXOR_PACKS_DIR": str(packs), "HELIXOR_DEFAULT_PACK": AGENT_PACK,
            "HELIXOR_PACK_SIGNERS": str(signers)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Procs:
    """Processes started by the test, stopped (process group and all) at exit."""

    def __init__(self, work: Path):
        self.work = work
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        out = open(self.work / f"{name}.out", "w")
        err = open(self.work / f"{name}.err", "w")
        p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                             env={**os.environ, **(env or {})}, cwd=self.work, start_new_session=True)
        self.procs[name] = p
        return p

    def text(self, name: str, stream: str = "out") -> str:
        try:
            return (self.work / f"{name}.{stream}").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def lines_with(self, name: str, prefixes: list[str], timeout: float, need: int) -> dict[str, str]:
        """The last word of the first stdout line starting with each prefix,
        waiting until `need` of them (the first ones listed) are there; the
        others get until the timeout too, but are optional."""
        deadline = time.time() + timeout
        found: dict[str, str] = {}
        while True:
            for line in self.text(name).splitlines():
                for prefix in prefixes:
                    if prefix not in found and line.startswith(prefix):
                        found[prefix] = line.split()[-1]
            if len(found) == len(prefixes) or time.time() > deadline:
                break
            if self.procs[name].poll() is not None:
                break
            time.sleep(0.05)
        missing = [p for p in prefixes[:need] if p not in found]
        if missing:
            raise RuntimeError(f"{name} printed no {missing!r}:\n" + self.text(name, "err")[-3000:])
        return found

    def stop(self, name: str) -> None:
        p = self.procs.pop(name, None)
        if p and p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.stop(name)

    def listening(self, name: str, timeout: float = 30) -> str:
        """The address a process printed as `listening on ADDR`."""
        return self.lines_with(name, ["listening on "], timeout, 1)["listening on "]
