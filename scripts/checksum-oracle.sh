#!/usr/bin/env bash
# Regenerates the python-stdnum oracle of the [§16.2](docs/codons.md#s16-2) validators
# (tests/checksum/cases.json, read by tests/it/checksum_oracle.rs) and the IBAN
# registry (src/checksum/iban_registry.rs). Installs the pinned
# python-stdnum once in a virtual environment under a cache folder it reuses
# ($HELIXOR_E2E_CACHE, default ~/.cache/helixor-e2e). Arguments go to
# scripts/checksum-oracle.py (--valid N, --near N).
set -euo pipefail
cd "$(dirname "$0")/.."
STDNUM_VERSION=2.2
cache=${HELIXOR_E2E_CACHE:-$HOME/.cache/helixor-e2e}
venv=$cache/stdnum-$STDNUM_VERSION
if ! "$venv/bin/python" -c "import stdnum; assert stdnum.__version__ == '$STDNUM_VERSION'" 2>/dev/null; then
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "python-stdnum==$STDNUM_VERSION"
fi
mkdir -p src/checksum tests/checksum
"$venv/bin/python" scripts/checksum-oracle.py "$@"
