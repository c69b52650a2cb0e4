#!/usr/bin/env bash
# The README's renewal runbook, run end to end on loopback with the kubelet's
# projected-volume swap simulated on disk: a deployment directory whose
# `..data` symlink is swapped by one rename. Exits non-zero if any step does
# not behave as the README says. Needs only a built helixor-pack.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${HELIXOR_PACK:-$PWD/target/release/helixor-pack}
[ -x "$bin" ] || { cargo build --release --locked --bin helixor-pack >/dev/null 2>&1; bin=$PWD/target/release/helixor-pack; }
playbooks=$PWD/config/demo/playbooks
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
fail() { echo "renewal-demo: FAILED: $*" >&2; exit 1; }
status() { curl -s "$url/v1/status" | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['generation'], d['license']['license_id'], (d['last_reload'] or {}).get('result'), (d['last_reload'] or {}).get('error'))"; }
wait_for() { for _ in $(seq 50); do [ "$(status)" = "$1" ] && return 0; sleep 0.1; done; fail "expected status '$1', got '$(status)'"; }

# 1. The issuer key pair (kept offline in real life) and its public half.
"$bin" license keygen --key-id acme-issuer --out keys >/dev/null
mkdir -p issuer-keys && cp keys/acme-issuer.pub issuer-keys/

# 2. A release = a license and every pack compiled for it, in deployment/..NAME
release() {
  mkdir -p "deployment/..$1/packs"
  "$bin" license issue --issuer-key keys/acme-issuer.key --license-id "$2" \
    --licensee "Acme Corp" --packs 'compliance.*' --features custom_playbook_compilation \
    --days 365 --out "deployment/..$1/license.hxlic" >/dev/null
  if [ "${3:-}" != license-only ]; then
    for p in "$playbooks"/*.yaml; do
      case $p in *.test.yaml) continue ;; esac # policy tests ([§13](docs/policy-tests.md#s13))
      "$bin" compile --playbook "$p" --license "deployment/..$1/license.hxlic" \
        --issuer-keys issuer-keys --out "deployment/..$1/packs/$(basename "$p" .yaml).hxpack" >/dev/null
    done
  fi
}
swap() { ln -s "..$1" deployment/..data_tmp && mv -T deployment/..data_tmp deployment/..data; }

release 2026 lic_acme_2026
ln -s ..2026 deployment/..data
ln -s ..data/license.hxlic deployment/license.hxlic
ln -s ..data/packs deployment/packs
cat > helixor.yaml <<'YAML'
listen: 127.0.0.1:0
license: deployment/license.hxlic
packs_dir: deployment/packs
issuer_keys: issuer-keys
default_pack: compliance.regulatory_pii_guard.v1
reload: {debounce_ms: 100}
log: {level: warn}
YAML
"$bin" serve --config helixor.yaml > stdout 2> stderr &
pid=$!
for _ in $(seq 50); do grep -q '^listening on' stdout && break; sleep 0.1; done
url=http://$(sed -n 's/^listening on //p' stdout)
wait_for "1 lic_acme_2026 None None"

# 3. Renewal: license and packs swapped together -> generation 2.
release 2027 lic_acme_2027
swap 2027
wait_for "2 lic_acme_2027 success None"

# 4. Half a deployment (the license alone, old packs): reload fails, generation 2 serves.
release 2028 lic_acme_2028 license-only
cp deployment/..2027/packs/* deployment/..2028/packs/
swap 2028
wait_for "2 lic_acme_2027 failure PackUnsealError"
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/evaluate" -H 'content-type: application/json' -d '{"text":"hi"}')
[ "$code" = 200 ] || fail "evaluate answered $code during a half deployment"
# Captured, then matched: `curl | grep -q` under pipefail fails when grep
# exits before curl has written the whole page (curl: SIGPIPE).
metrics=$(curl -s "$url/metrics")
grep -q '^helixor_last_reload_successful 0' <<<"$metrics" || fail "metrics do not show the failure"

# 5. The other half arrives: packs recompiled for the 2028 license.
for p in "$playbooks"/*.yaml; do
  case $p in *.test.yaml) continue ;; esac # policy tests ([§13](docs/policy-tests.md#s13))
  "$bin" compile --playbook "$p" --license deployment/..2028/license.hxlic \
    --issuer-keys issuer-keys --out "deployment/..2028/packs/$(basename "$p" .yaml).hxpack" >/dev/null
done
wait_for "3 lic_acme_2028 success None"
echo "renewal-demo: ok (generation 1 -> 2 on a full swap; a half deployment kept generation 2 serving; its second half made generation 3)"
