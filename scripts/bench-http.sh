#!/usr/bin/env bash
# HTTP load benchmark of `helixor-pack serve` on loopback with wrk (issue 3).
# Starts the release server on a copy of the demo deployment, then measures:
#   1. requests/s of GET /healthz and of POST /evaluate (~300-byte prompt), and their ratio;
#   2. p50/p99 latency of /evaluate at about half the maximum rate;
#   3. resident memory after start-up and after 1,000 reloads that swap packs;
#   4. non-2xx answers and socket errors during 100 reloads under load;
#   5. /evaluate with the decision log (SPEC §19: signed checkpoints, payload
#      HMAC) on against off, in alternating runs on two servers: req/s, p99,
#      their ratio, and the lines written.
# Every request goes to 127.0.0.1; every loop is bounded. Usage:
#   scripts/bench-http.sh [SECONDS_PER_RUN] [log]   (default 10; `log`: part 5 only)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
only=${2:-}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --locked --bin helixor-pack >/dev/null 2>&1
bin=$PWD/target/release/helixor-pack

work=$(mktemp -d)
server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# A private copy of the demo deployment, plus a second sealing of its packs
# (same playbooks, new nonces: new file digests) to alternate between.
cp -r config/demo "$work/demo"
tmpkeys=$work/keys
"$bin" license keygen --key-id bench --out "$tmpkeys" >/dev/null
mkdir -p "$work/trusted" "$work/packs-a" "$work/packs-b"
cp "$tmpkeys/bench.pub" "$work/trusted/"
"$bin" license issue --issuer-key "$tmpkeys/bench.key" --license-id lic_bench --licensee bench \
  --features custom_playbook_compilation --days 2 --out "$work/license.hxlic" >/dev/null
for set in a b; do
  for pb in config/demo/playbooks/*.yaml; do
    case $pb in *.test.yaml) continue ;; esac # policy tests ([§13](docs/policy-tests.md#s13))
    "$bin" compile --playbook "$pb" --license "$work/license.hxlic" --issuer-keys "$work/trusted" \
      --out "$work/packs-$set/$(basename "$pb" .yaml).hxpack" >/dev/null
  done
done
mkdir -p "$work/packs" && cp "$work/packs-a/"* "$work/packs/"
cat > "$work/helixor.yaml" <<YAML
listen: 127.0.0.1:0
license: license.hxlic
packs_dir: packs
issuer_keys: trusted
default_pack: custom.internal_ids.v1
reload: {watch: false, rescan_interval_s: 0}
log: {level: warn}
YAML

"$bin" serve --config "$work/helixor.yaml" > "$work/stdout" 2> "$work/stderr" &
server_pid=$!
for _ in $(seq 100); do grep -q '^listening on' "$work/stdout" 2>/dev/null && break; sleep 0.1; done
addr=$(sed -n 's/^listening on //p' "$work/stdout")
[ -n "$addr" ] || { cat "$work/stderr"; exit 1; }
url=http://$addr
rss() { awk '/VmRSS/ {print $2}' "/proc/$server_pid/status"; }

prompt='Summarise the attached meeting notes for the platform team. Action items: migrate the billing service to the new cluster, rotate the staging credentials, and schedule the quarterly access review. Keep the tone neutral and do not include personal details; the draft is due on Friday.'
body=$(printf '{"text": "%s"}' "$prompt")
cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[$body]]
LUA

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r)"
echo "prompt bytes: ${#prompt}"
curl -s -X POST -H 'content-type: application/json' -d "$body" "$url/evaluate" | head -c 200; echo
rss_start=$(rss)

# 5. The decision log: a second server on the same deployment writes one
# line per decision; off and on alternate so that the machine's drift hits
# both alike.
decision_log() {
  "$bin" license keygen --key-id bench-log --out "$work/logkeys" >/dev/null
  head -c 32 /dev/urandom > "$work/logkeys/hmac.key"
  sed 's/^log: .*/log: {level: warn}/' "$work/helixor.yaml" > "$work/logged.yaml"
  cat >> "$work/logged.yaml" <<YAML
decision_log:
  path: $work/audit/decisions.jsonl
  signing_key: $work/logkeys/bench-log.key
  hmac_key_file: $work/logkeys/hmac.key
YAML
  "$bin" serve --config "$work/logged.yaml" > "$work/stdout2" 2> "$work/stderr2" &
  log_pid=$!
  for _ in $(seq 100); do grep -q '^listening on' "$work/stdout2" 2>/dev/null && break; sleep 0.1; done
  url2=http://$(sed -n 's/^listening on //p' "$work/stdout2")
  wrk -t1 -c16 -d2s -s "$work/post.lua" "$url2/evaluate" >/dev/null
  local round which u run rps p99
  for round in 1 2 3; do
    for which in off on; do
      u=$url; [ "$which" = on ] && u=$url2
      run=$(wrk -t1 -c32 -d"${secs}s" --latency -s "$work/post.lua" "$u/evaluate")
      rps=$(echo "$run" | awk '/Requests\/sec/ {print $2}')
      p99=$(echo "$run" | awk '/ 99%/ {print $2}')
      echo "decision log $which, round $round: $rps req/s, p99 $p99"
      echo "$which $rps" >> "$work/logruns"
    done
  done
  awk '{s[$1] += $2; n[$1]++} END {printf "decision log on/off throughput: %.2f (mean of %d rounds each)\n", (s["on"]/n["on"]) / (s["off"]/n["off"]), n["on"]}' "$work/logruns"
  kill -TERM "$log_pid"; wait "$log_pid" || true
  echo "lines written: $(wc -l < "$work/audit/decisions.jsonl"); $("$bin" log verify "$work/audit/decisions.jsonl" --checkpoint "$work/audit/decisions.jsonl.checkpoint" --key "$work/logkeys/bench-log.pub" | tail -1)"
}
if [ "$only" = log ]; then
  decision_log
  exit 0
fi

# Warm up, then one run each for the maximum rates.
wrk -t1 -c16 -d2s "$url/healthz" >/dev/null
wrk -t1 -c16 -d2s -s "$work/post.lua" "$url/evaluate" >/dev/null
health=$(wrk -t1 -c32 -d"${secs}s" "$url/healthz")
eval_out=$(wrk -t1 -c32 -d"${secs}s" -s "$work/post.lua" "$url/evaluate")
health_rps=$(echo "$health" | awk '/Requests\/sec/ {print $2}')
eval_rps=$(echo "$eval_out" | awk '/Requests\/sec/ {print $2}')
echo "GET /healthz     req/s: $health_rps"
echo "POST /evaluate   req/s: $eval_rps"
awk -v e="$eval_rps" -v h="$health_rps" 'BEGIN {printf "ratio evaluate/healthz: %.2f\n", e/h}'

# Latency at about half the maximum rate: closed-loop runs with 1 to 4
# connections; the one whose throughput is nearest half the maximum is
# reported. (wrk's delay() pacing is not used: its millisecond timers and the
# idle wake-ups of a 2-core VM dominate what it measures.)
half=$(awk -v e="$eval_rps" 'BEGIN {print e / 2}')
best=; best_gap=
for c in 1 2 3 4; do
  run=$(wrk -t1 -c"$c" -d"${secs}s" --latency -s "$work/post.lua" "$url/evaluate")
  rps=$(echo "$run" | awk '/Requests\/sec/ {print $2}')
  gap=$(awk -v r="$rps" -v h="$half" 'BEGIN {d = r - h; print (d < 0 ? -d : d)}')
  if [ -z "$best" ] || awk -v g="$gap" -v b="$best_gap" 'BEGIN {exit !(g < b)}'; then
    best=$run; best_gap=$gap; best_c=$c
  fi
done
echo "half-rate /evaluate: $(echo "$best" | awk '/Requests\/sec/ {print $2}') req/s with $best_c connections (half of max: $half)"
echo "$best" | awk '/ 50%/ {print "  p50 " $2} / 75%/ {print "  p75 " $2} / 90%/ {print "  p90 " $2} / 99%/ {print "  p99 " $2}'

swap() { # $1: a or b
  cp "$work/packs-$1/"* "$work/packs/.staging" 2>/dev/null || true
  for f in "$work/packs-$1/"*; do cp "$f" "$work/packs/.$(basename "$f").tmp" && mv "$work/packs/.$(basename "$f").tmp" "$work/packs/$(basename "$f")"; done
  curl -s -o /dev/null -w '%{http_code}' -X POST "$url/admin/reload"
}

rss_before=$(rss)
fail=0
for i in $(seq 1000); do
  code=$(swap $([ $((i % 2)) = 0 ] && echo a || echo b))
  [ "$code" = 200 ] || fail=$((fail + 1))
done
gen=$(curl -s "$url/v1/status" | sed -n 's/.*"generation":\([0-9]*\).*/\1/p')
rss_after=$(rss)
echo "rss after start-up: ${rss_start} KiB; before reloads: ${rss_before} KiB; after 1000 reloads: ${rss_after} KiB (generation $gen, $fail failed reloads)"
awk -v a="$rss_after" -v b="$rss_before" 'BEGIN {printf "rss growth over 1000 reloads: %.1f MiB\n", (a-b)/1024}'

# 100 reloads while wrk drives /evaluate.
wrk -t1 -c16 -d"$((secs + 5))s" -s "$work/post.lua" "$url/evaluate" > "$work/underload" &
wrk_pid=$!
sleep 1
for i in $(seq 100); do swap $([ $((i % 2)) = 0 ] && echo a || echo b) >/dev/null; sleep 0.05; done
wait "$wrk_pid"
total=$(awk '/requests in/ {print $1}' "$work/underload")
non2xx=$(awk '/Non-2xx/ {print $5}' "$work/underload"); non2xx=${non2xx:-0}
sockerr=$(awk '/Socket errors/ {print $0}' "$work/underload"); sockerr=${sockerr:-none}
echo "during 100 reloads: $total requests, non-2xx: $non2xx, socket errors: $sockerr"
decision_log
