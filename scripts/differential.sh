#!/usr/bin/env bash
# Differential test of the engine ([§6](docs/evaluation.md#s6)): `helixor-pack run --jsonl` on
# thousands of generated texts (multilingual words, PII hits and near
# misses) against the independent Python model in tests/model/, for the
# reference playbooks and a playbook of assorted custom rules; then the same
# texts with `--normalize evasion` ([§15](docs/evasion.md#s15)), reporting which decisions
# change and why (tests/model/evasion_diff.py).
#   scripts/differential.sh [COUNT]   (default 5000 texts)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5000}
venv=target/model-venv
# unicodedata2: the Unicode version of the Rust crates (18.0), for the
# evasion model's categories and Numeric_Type.
if ! "$venv/bin/python" -c 'import yaml, unicodedata2' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'PyYAML>=6' 'unicodedata2==18.0.0'
fi
py=$venv/bin/python
bin=${HELIXOR_PACK:-$PWD/target/debug/helixor-pack}
[ -x "$bin" ] || cargo build --locked --bin helixor-pack >/dev/null 2>&1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" license keygen --key-id diff --out "$work/keys" >/dev/null
mkdir -p "$work/trusted" && cp "$work/keys/diff.pub" "$work/trusted/"
"$bin" license issue --issuer-key "$work/keys/diff.key" --license-id lic_diff --licensee diff \
  --features custom_playbook_compilation --days 1 --out "$work/lic.hxlic" >/dev/null
"$py" tests/model/gen_texts.py 20261130 "$count" > "$work/texts.jsonl"
"$py" tests/model/gen_texts.py 20261201 "$count" evasive > "$work/evasive.jsonl"
status=0
for pb in tests/fixtures/internal_ids.yaml tests/fixtures/order_notes.yaml \
          tests/fixtures/regulatory_pii_guard.yaml tests/fixtures/fuzz_rules.yaml; do
  "$bin" compile --playbook "$pb" --license "$work/lic.hxlic" --issuer-keys "$work/trusted" \
    --out "$work/p.hxpack" >/dev/null
  "$bin" run --pack "$work/p.hxpack" --license "$work/lic.hxlic" --issuer-keys "$work/trusted" \
    --jsonl --input "$work/texts.jsonl" > "$work/out.jsonl"
  "$py" tests/model/engine_model.py "$pb" "$work/texts.jsonl" "$work/out.jsonl" || status=1
  # [§15](docs/evasion.md#s15): the same texts through the evasion view; which decisions
  # change and why, and none on a text the view leaves as it is.
  "$bin" run --pack "$work/p.hxpack" --license "$work/lic.hxlic" --issuer-keys "$work/trusted" \
    --jsonl --normalize evasion --input "$work/texts.jsonl" > "$work/evasion.jsonl"
  "$py" tests/model/evasion_diff.py "$pb" "$work/texts.jsonl" "$work/out.jsonl" "$work/evasion.jsonl" || status=1
  # And on texts whose PII is often written evasively.
  for mode in none evasion; do
    "$bin" run --pack "$work/p.hxpack" --license "$work/lic.hxlic" --issuer-keys "$work/trusted" \
      --jsonl --normalize "$mode" --input "$work/evasive.jsonl" > "$work/evasive-$mode.jsonl"
  done
  "$py" tests/model/evasion_diff.py "$pb (evasive texts)" "$work/evasive.jsonl" \
    "$work/evasive-none.jsonl" "$work/evasive-evasion.jsonl" || status=1
done
exit $status
