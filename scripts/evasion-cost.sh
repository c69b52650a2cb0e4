#!/usr/bin/env bash
# What `normalize: evasion` costs against `none` ([§15](docs/evasion.md#s15)), in instructions
# (callgrind), on the engine bench's payloads: each case is evaluated 1 and
# 401 times in its own process (`HELIXOR_BENCH_ONCE`, `HELIXOR_BENCH_REPEAT`
# of benches/engine.rs) and the difference divided by 400, so start-up and
# the one-time character tables are left out. Instruction counts do not move
# with the load of a shared machine; wall times do, by 20-50%.
# Usage: scripts/evasion-cost.sh [ENGINE_BENCH_BINARY] [CASE...]
#   default binary: built with `cargo bench --bench engine --no-run`
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-}
shift || true
if [ -z "$bin" ]; then
  bin=$(cargo bench --locked --bench engine --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "engine" and m.get("executable"):
        print(m["executable"])')
fi
[ -x "$bin" ] || { echo "no engine bench binary" >&2; exit 1; }
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(clean_ascii_1k pii_dense_1k_one_quote mixed_script_1k mixed_script_64k_two_pii \
  cyrillic_greek_1k dashes_prose_1k evasive_pii_1k evasive2_pii_1k)
ir() { # CASE MODE REPEAT -> instructions
  HELIXOR_BENCH_ONCE="$1:$2" HELIXOR_BENCH_REPEAT="$3" valgrind --tool=callgrind \
    --callgrind-out-file=/dev/null "$bin" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' | sort -n | tail -1  # the bench process, not a child it forks
}
printf '%-26s %12s %12s %7s\n' case none evasion ratio
for c in "${cases[@]}"; do
  declare -A per=()
  for m in none evasion; do
    one=$(ir "$c" "$m" 1)
    many=$(ir "$c" "$m" 401)
    per[$m]=$(( (many - one) / 400 ))
  done
  python3 -c "import sys; n, e = int(sys.argv[2]), int(sys.argv[3]); print(f'{sys.argv[1]:<26} {n:>12,} {e:>12,} {e / n:>6.2f}x')" \
    "$c" "${per[none]}" "${per[evasion]}"
done
