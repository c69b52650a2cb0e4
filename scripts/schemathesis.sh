#!/usr/bin/env bash
# Drives the live server with schemathesis against openapi.yaml (issue 3):
# no server errors, every response conforms to the document. Starts the
# debug binary on an ephemeral loopback port with the demo
# deployment and stops it at the end. Then the same for the catalog
# (`catalog serve` on the demo playbooks) against openapi-catalog.yaml.
# Installs schemathesis in a venv.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/schemathesis-venv
if [ ! -x "$venv/bin/schemathesis" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'schemathesis>=4,<5'
fi
cargo build --locked --bin helixor-pack >/dev/null 2>&1
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
HELIXOR_LOG_LEVEL=warn target/debug/helixor-pack serve --config config/helixor.yaml \
  --listen 127.0.0.1:0 > "$work/stdout" 2> "$work/stderr" &
pid=$!
for _ in $(seq 100); do grep -q '^listening on' "$work/stdout" 2>/dev/null && break; sleep 0.1; done
addr=$(sed -n 's/^listening on //p' "$work/stdout")
[ -n "$addr" ] || { cat "$work/stderr"; exit 1; }
timeout 600 "$venv/bin/schemathesis" run openapi.yaml --url "http://$addr" \
  --checks all --max-examples 50 --seed 20261130 --request-timeout 5 --workers 2

# The catalog ([§14](docs/catalog.md#s14)). Its packs need a genuine license, which random
# bodies never are: every pack request is a documented 400/403/404/413/415,
# and schemathesis warns that the operation only answered 403.
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
target/debug/helixor-pack catalog serve --playbooks config/demo/playbooks \
  --issuer-keys config/demo/issuer-keys --listen 127.0.0.1:0 --log-level warn \
  > "$work/catalog.stdout" 2> "$work/catalog.stderr" &
pid=$!
for _ in $(seq 100); do grep -q '^listening on' "$work/catalog.stdout" 2>/dev/null && break; sleep 0.1; done
addr=$(sed -n 's/^listening on //p' "$work/catalog.stdout")
[ -n "$addr" ] || { cat "$work/catalog.stderr"; exit 1; }
timeout 600 "$venv/bin/schemathesis" run openapi-catalog.yaml --url "http://$addr" \
  --checks all --max-examples 50 --seed 20261130 --request-timeout 5 --workers 2
