#!/usr/bin/env bash
# The cost of a stream session against one evaluation (issue 7, SPEC §11.1:
# 1 MiB in 16-byte pieces within 3x one evaluation), in CPU time, on a shared
# machine whose load moves wall times by 20-50% between runs.
#
# Builds the stream bench (release), then runs ROUNDS rounds; each round runs
# one process per mode, in turn: `none` (start-up only), `eval` (one
# evaluation of the 1 MiB reply), and a session in 1-, 16- and 256-byte
# pieces, each repeated REPEAT times in its process
# (`HELIXOR_BENCH_ONCE`, `HELIXOR_BENCH_REPEAT` of benches/stream.rs). A
# process's CPU time (user + system, from bash's `times` of the child) minus
# the `none` process's, over REPEAT, is one run of a mode. Interleaving keeps
# every mode under the same load; the ratio of the fastest rounds (what other
# jobs can only slow down) and the median of the per-round ratios are printed.
# Usage: scripts/stream-ratio.sh [ROUNDS] [REPEAT] [NORMALIZE]
#   defaults: 7 rounds, 10 repeats, normalize none (or evasion)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
repeat=${2:-10}
norm=${3:-none}
modes=(none eval 16 256 1)

bin=$(cargo bench --locked --bench stream --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "stream" and m.get("executable"):
        print(m["executable"])')
[ -x "$bin" ] || { echo "no stream bench binary" >&2; exit 1; }

# CPU seconds (user + system) of one run of the bench binary in MODE.
cpu_of() {
    local mode=$1 r
    r=$( { HELIXOR_BENCH_ONCE=$mode HELIXOR_BENCH_REPEAT=$repeat HELIXOR_BENCH_NORMALIZE=$norm \
        "$bin" --bench >/dev/null; times; } | tail -1)
    # `times` prints the children's "user system" times, e.g. "0m1.234s 0m0.010s".
    python3 -c 'import re,sys
u, s = (float(m) * 60 + float(x) for m, x in re.findall(r"(\d+)m([\d.]+)s", sys.argv[1]))
print(u + s)' "$r"
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "binary: $bin; $rounds rounds, $repeat repeats, normalize $norm; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
    line="$r"
    for m in "${modes[@]}"; do
        line="$line $m=$(cpu_of "$m")"
    done
    echo "$line" | tee -a "$out"
done
python3 - "$out" "$repeat" <<'EOF'
import statistics, sys
rounds = []
for line in open(sys.argv[1]):
    parts = line.split()[1:]
    rounds.append({k: float(v) for k, v in (p.split("=") for p in parts)})
repeat = int(sys.argv[2])
per = [{m: (r[m] - r["none"]) / repeat for m in r if m != "none"} for r in rounds]
fast = {m: min(p[m] for p in per) for m in per[0]}
print(f"one evaluation: fastest {fast['eval'] * 1e3:.2f} ms")
for m in ("1", "16", "256"):
    med = statistics.median(p[m] / p["eval"] for p in per)
    print(f"pieces of {m:>3} B: fastest {fast[m] * 1e3:7.2f} ms, "
          f"{fast[m] / fast['eval']:.2f}x (fastest rounds), {med:.2f}x (median of rounds)")
EOF
