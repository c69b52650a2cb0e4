#!/usr/bin/env bash
# The cost of a stream session against one evaluation (issue 7, [§11.1](docs/streaming.md#s11-1):
# 1 MiB in 16-byte pieces within 3x one evaluation), in CPU time, on a shared
# machine whose load moves wall times by 20-50% between runs.
#
# Builds the stream bench (release), then runs ROUNDS rounds; each round runs
# one process per mode, in turn: `none` (start-up only), `eval` (one
# evaluation of the text), and a session in pieces of each size in MODES,
# each repeated REPEAT times in its process (`HELIXOR_BENCH_ONCE`,
# `HELIXOR_BENCH_REPEAT` of benches/stream.rs). A process's CPU time (user +
# system, from bash's `times` of the child) minus the `none` process's, over
# REPEAT, is one run of a mode. Interleaving keeps every mode under the same
# load; the ratio of the fastest rounds (what other jobs can only slow down)
# and the median of the per-round ratios are printed.
#
# Usage: scripts/stream-ratio.sh [ROUNDS] [REPEAT] [NORMALIZE]
#   defaults: 7 rounds, 10 repeats, normalize none (or evasion)
# Environment:
#   MODES        piece sizes: N bytes, cpN code points, an `m` before either
#                to push them 256 at a time as the server does (default
#                "16 256 1")
#   BINS         "name=path ..." bench binaries to compare, interleaved in
#                each round (default: this tree's, built here), e.g. a
#                baseline built from another commit
#   HELIXOR_BENCH_TEXT, HELIXOR_BENCH_BYTES   the text (benches/stream.rs)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
repeat=${2:-10}
norm=${3:-none}
read -r -a sizes <<<"${MODES:-16 256 1}"
modes=(none eval "${sizes[@]}")

if [ -n "${BINS:-}" ]; then
    read -r -a bins <<<"$BINS"
else
    bin=$(cargo bench --locked --bench stream --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "stream" and m.get("executable"):
        print(m["executable"])')
    bins=("this=$bin")
fi
for b in "${bins[@]}"; do
    [ -x "${b#*=}" ] || { echo "no stream bench binary ${b#*=}" >&2; exit 1; }
done

# CPU seconds (user + system) of one run of bench binary BIN in MODE.
cpu_of() {
    local bin=$1 mode=$2 r
    r=$( { HELIXOR_BENCH_ONCE=$mode HELIXOR_BENCH_REPEAT=$repeat HELIXOR_BENCH_NORMALIZE=$norm \
        "$bin" --bench >/dev/null; times; } | tail -1)
    # `times` prints the children's "user system" times, e.g. "0m1.234s 0m0.010s".
    python3 -c 'import re,sys
u, s = (float(m) * 60 + float(x) for m, x in re.findall(r"(\d+)m([\d.]+)s", sys.argv[1]))
print(u + s)' "$r"
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "binaries: ${bins[*]}; $rounds rounds, $repeat repeats, normalize $norm," \
    "text ${HELIXOR_BENCH_TEXT:-reply} ${HELIXOR_BENCH_BYTES:-1048576} B; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
    for b in "${bins[@]}"; do
        line="$r ${b%%=*}"
        for m in "${modes[@]}"; do
            line="$line $m=$(cpu_of "${b#*=}" "$m")"
        done
        echo "$line" | tee -a "$out"
    done
done
python3 - "$out" "$repeat" "${sizes[@]}" <<'EOF'
import statistics, sys
rounds = {}
for line in open(sys.argv[1]):
    parts = line.split()
    rounds.setdefault(parts[1], []).append({k: float(v) for k, v in (p.split("=") for p in parts[2:])})
repeat = int(sys.argv[2])
for name, rs in rounds.items():
    per = [{m: (r[m] - r["none"]) / repeat for m in r if m != "none"} for r in rs]
    fast = {m: min(p[m] for p in per) for m in per[0]}
    mid = {m: statistics.median(p[m] for p in per) for m in per[0]}
    print(f"{name}: one evaluation: fastest {fast['eval'] * 1e3:.2f} ms, median {mid['eval'] * 1e3:.2f} ms")
    for m in sys.argv[3:]:
        med = statistics.median(p[m] / p["eval"] for p in per)
        # `m…` modes push 256 pieces at a time (`push_many`, as the server).
        many = "many " if m.startswith("m") else ""
        size = m.removeprefix("m")
        unit = "code points" if size.startswith("cp") else "B"
        print(f"{name}: {many}pieces of {size.removeprefix('cp'):>7} {unit}: fastest {fast[m] * 1e3:8.2f} ms, "
              f"median {mid[m] * 1e3:8.2f} ms, "
              f"{fast[m] / fast['eval']:.2f}x (fastest rounds), {med:.2f}x (median of rounds)")
EOF
