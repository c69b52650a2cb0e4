#!/usr/bin/env bash
# Engine time of context words on dense candidates (issue 22, [§11.4](docs/limits.md#s11-4)):
# a version-2 codon `\b[A-Z0-9]{9}\b` with eight context words and windows
# of 256 code points each way, on 1 MiB of nine-character tokens (100,000
# candidates), without any context word near them and with one beside
# each; and the same codon without `context`, for the ratio.
#
#   scripts/context-cost.sh [BIN] [ROUNDS]
#
# BIN defaults to target/release/helixor-pack. Prints `latency_us` of each
# run (the engine's time for the whole text). Uses the demo license.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/helixor-pack}
ROUNDS=${2:-3}
export HELIXOR_LICENSE_FILE=$PWD/config/demo/license.hxlic
export HELIXOR_ISSUER_KEYS=$PWD/config/demo/issuer-keys
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
codon() {
  cat <<YAML
schema_version: 2
pack_id: bench.context_cost.v1
version: 1.0.0
codons:
  - code: TOKEN9
    codon_type: extract_pattern
    params: {pattern: '\b[A-Z0-9]{9}\b'}
$1
    binds_to: has_token
    remedy_template: "[T]"
hard_rules:
  - {id: tok, condition: state.has_token, action: redact_token, severity: warning}
YAML
}
codon "    context:
      words: [passport, passport number, travel document, document number, pass no, reisepass, passeport, pasaporte]
      before: 256
      after: 256" > "$work/context.yaml"
codon "" > "$work/plain.yaml"
python3 - "$work" <<'PY'
import sys
d = sys.argv[1]
open(f"{d}/far.txt", "w").write(("ABCDEFGHI pppppppp " * 60000)[: 1 << 20])
open(f"{d}/near.txt", "w").write(("ABCDEFGHI passport " * 60000)[: 1 << 20])
PY
for p in context plain; do
  "$BIN" compile --playbook "$work/$p.yaml" --out "$work/$p.hxpack" >/dev/null
done
run() {
  "$BIN" run --pack "$work/$1.hxpack" --input "$work/$2.txt" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["action"], round(d["latency_us"]))'
}
for r in $(seq "$ROUNDS"); do
  echo "round $r: context, no word near: $(run context far) | context, a word beside each: $(run context near) | no context: $(run plain far)"
done
