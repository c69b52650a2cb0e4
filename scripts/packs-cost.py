#!/usr/bin/env python3
"""Engine time of every curated pack (packs/*.yaml, [§16.5](docs/curated-packs.md#s16-5)) on 1 MiB
texts: text dense with the packs' own test values, and adversarial runs
(digits, spaced digit groups, base64, upper-case alphanumerics, one letter).
Each pack is compiled under a `compliance.*` id for the demo license into a
temporary directory and run with `helixor-pack run --input`; the figure is
the decision's `latency_us`, best of three. Usage:
  python3 scripts/packs-cost.py [path/to/helixor-pack]
"""
import json
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "config", "demo")
PACKS = ["secrets", "pii_us", "pii_eu", "pii_in", "pii_apac"]
SIZE = 1 << 20


def test_texts(name):
    import yaml  # PyYAML
    with open(os.path.join(ROOT, "packs", f"{name}.test.yaml")) as f:
        return [c["text"] for c in yaml.safe_load(f)["cases"]]


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "release", "helixor-pack")
    r = random.Random(1)
    dense = " ".join(t for n in PACKS for t in test_texts(n))
    texts = {
        "dense": (dense * (SIZE // len(dense) + 1))[:SIZE],
        "digits": "".join(r.choice("0123456789") for _ in range(SIZE)),
        "digit groups": " ".join("".join(r.choice("0123456789") for _ in range(4)) for _ in range(SIZE // 5))[:SIZE],
        "base64": "".join(r.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") for _ in range(SIZE)),
        "upper alnum": "".join(r.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(SIZE)),
        "x": "x" * SIZE,
    }
    lic = ["--license", f"{DEMO}/license.hxlic", "--issuer-keys", f"{DEMO}/issuer-keys"]
    with tempfile.TemporaryDirectory() as tmp:
        for n in PACKS:
            with open(os.path.join(ROOT, "packs", f"{n}.yaml")) as f:
                y = f.read().replace(f"pack_id: catalog.{n}.v1", f"pack_id: compliance.{n}_cost.v1")
            with open(f"{tmp}/{n}.yaml", "w") as f:
                f.write(y)
            subprocess.run([binary, "compile", "--playbook", f"{tmp}/{n}.yaml", *lic, "--out", f"{tmp}/{n}.hxpack"],
                           check=True, stdout=subprocess.DEVNULL)
        print("1 MiB, ms of engine time (best of 3); load", open("/proc/loadavg").read().split()[:3])
        print("| text | " + " | ".join(PACKS) + " | all five |")
        print("|---|" + "---|" * (len(PACKS) + 1))
        for name, text in texts.items():
            path = f"{tmp}/text.txt"
            with open(path, "w") as f:
                f.write(text)
            row = []
            for n in PACKS:
                best = None
                for _ in range(3):
                    out = subprocess.run([binary, "run", "--pack", f"{tmp}/{n}.hxpack", *lic, "--input", path],
                                         capture_output=True, text=True, check=True)
                    ms = json.loads(out.stdout)["latency_us"] / 1000
                    best = ms if best is None else min(best, ms)
                row.append(best)
            print(f"| {name} | " + " | ".join(f"{x:.1f}" for x in row) + f" | {sum(row):.1f} |")


if __name__ == "__main__":
    main()
