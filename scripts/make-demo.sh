#!/usr/bin/env bash
# Regenerates the demo deployment under config/demo/ with helixor-pack itself:
# a fresh demo issuer key pair (the secret half is thrown away), a ten-year
# demo license, one sealed pack per playbook in config/demo/playbooks/, and
# each pack's signature (SPEC §17) by a fresh demo signing key (the secret
# half is thrown away too; config/demo/pack-signers/ holds its public key,
# which config/helixor.yaml trusts).
# The license and its packs are always rebuilt together (a new license has a
# new content key; old packs cannot open with it).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${HELIXOR_PACK:-target/release/helixor-pack}
if [ ! -x "$bin" ]; then
  cargo build --release --locked --bin helixor-pack
fi
demo=config/demo
key_id=helixor-demo-issuer
signer_id=helixor-demo-signer
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" license keygen --key-id "$key_id" --out "$tmp/keys" >/dev/null
"$bin" license issue --issuer-key "$tmp/keys/$key_id.key" \
  --license-id lic_helixor_demo_0001 --licensee "Helixor demo deployment (not for production)" \
  --tier DEVELOPER --packs 'compliance.*' --features custom_playbook_compilation \
  --not-before 2026-01-01T00:00:00Z --not-after 2036-01-01T00:00:00Z \
  --out "$tmp/license.hxlic" >/dev/null

mkdir -p "$tmp/issuer-keys" "$tmp/packs" "$tmp/pack-signers"
cp "$tmp/keys/$key_id.pub" "$tmp/issuer-keys/"
"$bin" license keygen --key-id "$signer_id" --out "$tmp/signer-keys" >/dev/null
cp "$tmp/signer-keys/$signer_id.pub" "$tmp/pack-signers/"
for playbook in "$demo"/playbooks/*.yaml; do
  case $playbook in *.test.yaml) continue ;; esac # policy tests ([§13](docs/policy-tests.md#s13))
  name=$(basename "$playbook" .yaml)
  "$bin" compile --playbook "$playbook" --license "$tmp/license.hxlic" \
    --issuer-keys "$tmp/issuer-keys" --out "$tmp/packs/$name.hxpack" \
    --sign-key "$tmp/signer-keys/$signer_id.key"
done

# Swap the new deployment in only once every piece was built.
rm -rf "$demo/issuer-keys" "$demo/packs" "$demo/pack-signers"
mv "$tmp/issuer-keys" "$demo/issuer-keys"
mv "$tmp/packs" "$demo/packs"
mv "$tmp/pack-signers" "$demo/pack-signers"
install -m 0644 "$tmp/license.hxlic" "$demo/license.hxlic"
echo "demo deployment rebuilt in $demo"
