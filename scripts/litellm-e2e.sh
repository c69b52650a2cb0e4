#!/usr/bin/env bash
# End-to-end test of the LiteLLM integration (issue 8, [§12.1](docs/gateways.md#s12-1)) against
# the real LiteLLM proxy, pinned to 1.108.7 (never 1.107.0, a compromised
# release). Installs it once in a virtual environment under a cache folder
# it reuses ($HELIXOR_E2E_CACHE, default ~/.cache/helixor-e2e), builds the
# debug binary, and runs scripts/e2e/litellm_e2e.py (helixor serving the
# demo packs and scripts/e2e/agent_guard.yaml, compiled with the demo
# license): everything on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
LITELLM_VERSION=1.108.7
cache=${HELIXOR_E2E_CACHE:-$HOME/.cache/helixor-e2e}
venv=$cache/litellm-$LITELLM_VERSION
if ! "$venv/bin/python" -c "import litellm, importlib.metadata as m; assert m.version('litellm') == '$LITELLM_VERSION'" 2>/dev/null; then
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "litellm[proxy]==$LITELLM_VERSION"
fi
cargo build --locked --bin helixor-pack >/dev/null 2>&1
timeout 900 python3 scripts/e2e/litellm_e2e.py --litellm "$venv/bin/litellm" \
  --helixor "${HELIXOR_PACK:-target/debug/helixor-pack}" "$@"
