#!/usr/bin/env bash
# Interoperability of [§1](docs/formats.md#s1)-[§3](docs/formats.md#s3) with an independent Python implementation
# (tests/model/pack_model.py): Python opens packs and verifies licenses made by
# helixor-pack, and helixor-pack loads packs sealed and licenses signed by Python.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/model-venv
if ! "$venv/bin/python" -c 'import yaml, cryptography' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'PyYAML>=6' 'cryptography>=42'
fi
py=$venv/bin/python
bin=${HELIXOR_PACK:-$PWD/target/debug/helixor-pack}
[ -x "$bin" ] || cargo build --locked --bin helixor-pack >/dev/null 2>&1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "interop: FAILED: $*" >&2; exit 1; }

# helixor-pack -> Python
"$bin" license keygen --key-id rust-issuer --out "$work/keys" >/dev/null
mkdir -p "$work/trusted" && cp "$work/keys/rust-issuer.pub" "$work/trusted/"
"$bin" license issue --issuer-key "$work/keys/rust-issuer.key" --license-id lic_rust --licensee "Rüst" \
  --features custom_playbook_compilation --days 3 --out "$work/rust.hxlic" >/dev/null
for pb in tests/fixtures/internal_ids.yaml tests/fixtures/regulatory_pii_guard.yaml; do
  "$bin" compile --playbook "$pb" --license "$work/rust.hxlic" --issuer-keys "$work/trusted" --out "$work/r.hxpack" >/dev/null
  id=$("$py" tests/model/pack_model.py open "$work/r.hxpack" "$work/rust.hxlic" "$work/keys/rust-issuer.pub" "$pb")
  echo "python opened $id sealed by helixor-pack"
done

# Python -> helixor-pack: a pack sealed by Python for the helixor-pack license
"$py" tests/model/pack_model.py seal tests/fixtures/internal_ids.yaml "$work/rust.hxlic" "$work/py.hxpack"
action=$("$bin" run --pack "$work/py.hxpack" --license "$work/rust.hxlic" --issuer-keys "$work/trusted" \
  --text 'Status for PROJ-ZEUS-9X is green.' | "$py" -c 'import json,sys; print(json.load(sys.stdin)["action"])')
[ "$action" = block_internal_project_code ] || fail "python-sealed pack decided $action"
echo "helixor-pack ran a pack sealed by python: $action"

# Python -> helixor-pack: a license signed by Python (other offset, fractions, extra fields)
mkdir -p "$work/pytrust"
"$py" tests/model/pack_model.py issue py-issuer "$work/py.hxlic" "$work/pytrust"
"$bin" inspect-license --license "$work/py.hxlic" --issuer-keys "$work/pytrust" --json > "$work/il.json" \
  || fail "inspect-license refused the python-signed license: $(cat "$work/il.json")"
"$bin" compile --playbook tests/fixtures/order_notes.yaml --license "$work/py.hxlic" \
  --issuer-keys "$work/pytrust" --out "$work/o.hxpack" >/dev/null
"$py" tests/model/pack_model.py open "$work/o.hxpack" "$work/py.hxlic" "$work/pytrust/py-issuer.pub" tests/fixtures/order_notes.yaml >/dev/null
echo "helixor-pack verified and compiled with a license signed by python"
# The decision log ([§19](docs/guides/auditing.md#s19)): a server writes it; Python recomputes the
# root from the lines and verifies each `log prove` proof and its signed
# checkpoint (tests/model/tlog_model.py, from RFC 9162 and the C2SP specs).
"$bin" license keygen --key-id interop-log --out "$work/logkeys" >/dev/null
head -c 32 /dev/urandom > "$work/hmac.key"
cat > "$work/log.yaml" <<YAML
listen: 127.0.0.1:0
license: $PWD/config/demo/license.hxlic
packs_dir: $PWD/config/demo/packs
issuer_keys: $PWD/config/demo/issuer-keys
default_pack: compliance.regulatory_pii_guard.v1
reload:
  watch: false
decision_log:
  path: $work/audit/decisions.jsonl
  signing_key: $work/logkeys/interop-log.key
  hmac_key_file: $work/hmac.key
  checkpoint_every: 1
YAML
"$bin" serve --config "$work/log.yaml" > "$work/serve.out" 2> "$work/serve.err" &
serve_pid=$!
for _ in $(seq 1 100); do grep -q '^listening on ' "$work/serve.out" && break; sleep 0.1; done
addr=$(sed -n 's/^listening on //p' "$work/serve.out")
[ -n "$addr" ] || { kill "$serve_pid" 2>/dev/null; fail "serve did not start: $(cat "$work/serve.err")"; }
"$py" - "$addr" <<'PY'
import json, sys, urllib.request
for text in ["SSN 123-45-6789", "mail jane@example.com", "clean", "card 4111 1111 1111 1111", "call 212-555-0187", "more"]:
    req = urllib.request.Request(f"http://{sys.argv[1]}/evaluate", json.dumps({"text": text}).encode(),
                                 {"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()
PY
kill -TERM "$serve_pid"; wait "$serve_pid" || fail "serve did not stop cleanly"
log=$work/audit/decisions.jsonl
"$bin" log verify "$log" --checkpoint "$log.checkpoint" --key "$work/logkeys/interop-log.pub" >/dev/null \
  || fail "log verify refused the server's own log"
root=$("$bin" log verify "$log" --json | "$py" -c 'import json,sys; print(json.load(sys.stdin)["root"])')
[ "$root" = "$("$py" tests/model/tlog_model.py root "$log")" ] || fail "python computes another root"
for seq in 0 1 2 3 4 5; do
  "$bin" log prove "$log" --seq "$seq" > "$work/proof.txt"
  "$py" tests/model/tlog_model.py proof "$work/proof.txt" "$log" --key "$work/logkeys/interop-log.pub" \
    --name interop-log --seq "$seq" >/dev/null || fail "python refused the proof of entry $seq"
done
echo "python verified the decision log's root, checkpoint and six inclusion proofs"
echo "interop: ok"
