#!/usr/bin/env bash
# The cost of judging every string of a gateway body (issue 28, [§12.4](docs/gateways.md#s12-4)):
# POST /envoy/ext_authz/... with a chat request that has no tool traffic,
# and the same with an agent exchange (tool calls and a serialised tool
# result), on several helixor-pack binaries in one run, interleaved round
# by round so the shared machine's drift hits each alike. Each binary
# serves the demo deployment on 127.0.0.1; wrk drives one connection per
# core for SECONDS a run. ext_proc judges a body with the same code
# (src/server/gateway/mod.rs); its end-to-end figures come from
# `scripts/envoy-e2e.sh --only latency`. Usage:
#   BINS="old=/path/a new=target/release/helixor-pack" scripts/bench-gateways.sh [SECONDS] [ROUNDS]
# (default BINS: new=target/release/helixor-pack, built here; 10 s, 3 rounds).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-3}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
if [ -z "${BINS:-}" ]; then
  cargo build --release --locked --bin helixor-pack >/dev/null 2>&1
  BINS="new=$PWD/target/release/helixor-pack"
fi

work=$(mktemp -d)
server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
demo=$PWD/config/demo
# Only keys every binary knows.
cat > "$work/helixor.yaml" <<YAML
listen: 127.0.0.1:0
license: $demo/license.hxlic
packs_dir: $demo/packs
issuer_keys: $demo/issuer-keys
default_pack: compliance.regulatory_pii_guard.v1
reload: {watch: false, rescan_interval_s: 0}
log: {level: warn}
YAML

# A chat request without tools (what most traffic is), and an agent turn.
chat='{"model":"gpt-4o-mini","temperature":0.2,"messages":[{"role":"system","content":"You are a support assistant for the platform team. Answer briefly and never include personal data."},{"role":"user","content":"Summarise the attached meeting notes. Action items: migrate the billing service to the new cluster, rotate the staging credentials, and schedule the quarterly access review. The draft is due on Friday."}]}'
agent='{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a support assistant. Use the tools."},{"role":"user","content":"What is the status of order 8812?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"order_status","arguments":"{\"order_id\":\"8812\",\"fields\":[\"status\",\"eta\",\"notes\"]}"}}]},{"role":"tool","tool_call_id":"call_1","content":"{\"status\":\"shipped\",\"eta\":\"2026-12-05\",\"notes\":\"Left the warehouse on Monday; carrier confirms delivery by Friday. Customer asked for a call before delivery.\"}"}],"tools":[{"type":"function","function":{"name":"order_status","description":"Looks up an order by id and returns its status, ETA and notes.","parameters":{"type":"object","properties":{"order_id":{"type":"string"},"fields":{"type":"array","items":{"type":"string"}}},"required":["order_id"]}}}]}'
for name in chat agent; do
  body=${!name}
  # wrk's Lua long strings take the JSON as it is.
  printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = [[%s]]\n' \
    "$body" > "$work/$name.lua"
done

start() { # $1: binary
  "$1" serve --config "$work/helixor.yaml" > "$work/stdout" 2> "$work/stderr" &
  server_pid=$!
  for _ in $(seq 100); do grep -q '^listening on' "$work/stdout" 2>/dev/null && break; sleep 0.1; done
  addr=$(sed -n 's/^listening on //p' "$work/stdout")
  [ -n "$addr" ] || { cat "$work/stderr"; exit 1; }
}
stop() { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true; server_pid=; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bodies: chat ${#chat} B, agent ${#agent} B; $secs s a run, $rounds rounds, interleaved"
declare -A sum
for r in $(seq "$rounds"); do
  for spec in $BINS; do
    label=${spec%%=*}; bin=${spec#*=}
    start "$bin"
    url=http://$addr/envoy/ext_authz/v1/chat/completions
    for name in chat agent; do
      code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' \
        --data-binary "@-" "$url" <<<"${!name}")
      [ "$code" = 200 ] || { echo "$label $name: HTTP $code"; exit 1; }
      wrk -t1 -c2 -d2s -s "$work/$name.lua" "$url" >/dev/null
      out=$(wrk -t1 -c"$(nproc)" -d"${secs}s" --latency -s "$work/$name.lua" "$url")
      rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
      p50=$(echo "$out" | awk '/ 50%/ {print $2}')
      printf 'round %d %-6s %-5s %10s req/s  p50 %s\n' "$r" "$label" "$name" "$rps" "$p50"
      sum[$label.$name]=$(awk -v a="${sum[$label.$name]:-0}" -v b="$rps" 'BEGIN {print a + b}')
    done
    stop
  done
done
echo "mean req/s over $rounds rounds (ratio to the first binary):"
first=
declare -A base
for spec in $BINS; do
  label=${spec%%=*}
  for name in chat agent; do
    mean=$(awk -v s="${sum[$label.$name]}" -v n="$rounds" 'BEGIN {printf "%.0f", s / n}')
    [ -z "$first" ] && base[$name]=$mean
    ratio=$(awk -v m="$mean" -v b="${base[$name]}" 'BEGIN {printf "%.3f", m / b}')
    printf '  %-6s %-5s %8s req/s  %s\n' "$label" "$name" "$mean" "$ratio"
  done
  first=${first:-$label}
done
