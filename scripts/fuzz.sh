#!/usr/bin/env bash
# Coverage-guided fuzzing with AFL++ on stable Rust (issue 12): the targets of
# fuzz/ (container, license, playbook, json_body, stream, body_walker, signature) call the harnesses
# of src/fuzzing.rs. For each target chosen: builds the instrumented binaries,
# runs afl-fuzz under `nice -n 19` for SECONDS from fuzz/seeds/<target>/ plus
# the committed corpus, minimises the queue with afl-cmin into
# fuzz/corpus/<target>/ and copies every crash into fuzz/regressions/<target>/
# (replayed by `cargo test --test it fuzz_replay::`). AFL's own output stays in
# $FUZZ_OUT (default target/fuzz-out), never in the repository. Usage:
#   scripts/fuzz.sh [TARGET|all] [SECONDS]   (default: all, 60 s each)
#   scripts/fuzz.sh seeds                    (rewrites the fixture-keyed seeds)
# SECONDS is CPU time, not wall time: each fuzzer runs until afl-fuzz and the
# target processes under it have used that many CPU seconds (user + system,
# sampled from /proc every 5 s), so a run on a loaded, shared machine still
# does the work asked for. One fuzzer runs at a time; targets run one after
# another.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
targets=(container license playbook json_body stream body_walker signature)
what=${1:-all}
secs=${2:-60}
out=${FUZZ_OUT:-$root/target/fuzz-out}
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$root/target/fuzz}

if [ "$what" = seeds ]; then
    # Seeds that need the harnesses' fixed keys (the other seeds are files).
    CARGO_TARGET_DIR=${CARGO_TARGET_DIR%/fuzz} \
        cargo test --locked --test it fuzz_replay::write_fixture_seeds -- --ignored
    exit 0
fi
if [ "$what" != all ]; then
    case " ${targets[*]} " in
    *" $what "*) targets=("$what") ;;
    *) echo "unknown target $what (one of: ${targets[*]}, all, seeds)" >&2; exit 2 ;;
    esac
fi

# AFL++ through cargo-afl: installing cargo-afl builds its own AFL++
# (afl-fuzz, afl-cmin and the runtime the targets link) for the toolchain,
# from the AFL++ source the crate ships; `config --build` redoes that.
# (`afl-fuzz -h` exits non-zero: its usage text tells whether it is there.)
if ! cargo afl --version >/dev/null 2>&1; then
    cargo install cargo-afl --locked
fi
has_afl() {
    local usage
    usage=$(cargo afl fuzz -h 2>&1 || true)
    [[ $usage == *afl-fuzz* ]]
}
has_afl || cargo afl config --build
has_afl || { echo "cargo afl has no afl-fuzz: see cargo afl config --help" >&2; exit 1; }
# afl-cmin runs afl-showmap from PATH: cargo-afl's own, not another AFL++
# (Debian's afl++ 4.04c lacks the options that cargo-afl's afl-cmin passes).
# `sed -n 1p`, not `head -1`: it reads all of grep's output, so grep never
# dies of a closed pipe (which pipefail would turn into a failure).
afl_bin=$(dirname "$(cargo afl fuzz -h 2>&1 | grep -o '/[^ ]*/afl-fuzz' | sed -n 1p)")
export PATH=$afl_bin:$PATH AFL_PATH=$afl_bin

(cd fuzz && nice -n 19 cargo afl build --release --locked)
bin=$CARGO_TARGET_DIR/release

# Not a tuned machine: no core_pattern or CPU governor changes, no pinning
# (the cores are shared), no curses screen.
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1
export AFL_NO_UI=1 AFL_AUTORESUME=1

# The process tree under PID, PID first.
tree_pids() {
    local pids=("$1") i=0 p
    while [ $i -lt ${#pids[@]} ]; do
        for p in $(pgrep -P "${pids[$i]}" 2>/dev/null); do pids+=("$p"); done
        i=$((i + 1))
    done
    echo "${pids[@]}"
}
# CPU seconds used so far by the tree under PID: every live member's own time
# plus the time of the children it has reaped (fields 14-17 of
# /proc/PID/stat, in clock ticks).
tree_cpu_seconds() {
    local ticks=0 p f
    for p in $(tree_pids "$1"); do
        f=$(cat /proc/"$p"/stat 2>/dev/null) || continue
        f=${f##*) }
        read -r -a f <<<"$f"
        ticks=$((ticks + f[11] + f[12] + f[13] + f[14]))
    done
    echo $((ticks / $(getconf CLK_TCK)))
}

for t in "${targets[@]}"; do
    echo "== $t: ${secs} CPU seconds"
    seeds=$out/$t/in
    rm -rf "$seeds" && mkdir -p "$seeds"
    cp fuzz/seeds/"$t"/* "$seeds"/
    if [ -d fuzz/corpus/"$t" ]; then cp fuzz/corpus/"$t"/* "$seeds"/ 2>/dev/null || true; fi
    # -t: a run over 2 s is a hang (kept in AFL's output, not a regression).
    # AFL's -V and run_time are wall-clock, so the loop below measures CPU
    # instead: the utime + stime of every live process of the fuzzer's tree
    # plus what its reaped children used (cutime + cstime), the persistent
    # target included, and stops the fuzzer with SIGINT (AFL saves its state
    # and stats) once the total reaches SECONDS.
    nice -n 19 cargo afl fuzz -i "$seeds" -o "$out/$t/out" -t 2000 -- "$bin/$t" \
        >"$out/$t/afl.log" 2>&1 &
    top=$!
    started=$(date +%s)
    cpu=0
    while kill -0 "$top" 2>/dev/null; do
        cpu=$(tree_cpu_seconds "$top")
        [ "$cpu" -ge "$secs" ] && break
        sleep 5
    done
    cpu=$(tree_cpu_seconds "$top")
    for p in $(tree_pids "$top"); do
        if [ "$(cat /proc/"$p"/comm 2>/dev/null)" = afl-fuzz ]; then kill -INT "$p" 2>/dev/null || true; fi
    done
    wait "$top" || true
    if ! [ -s "$out/$t/out/default/fuzzer_stats" ]; then tail -30 "$out/$t/afl.log"; exit 1; fi
    echo "cpu_seconds $cpu wall_seconds $(($(date +%s) - started))" | tee "$out/$t/cpu.txt"
    stats=$out/$t/out/default/fuzzer_stats
    grep -E '^(run_time|execs_done|execs_per_sec|corpus_count|saved_crashes|saved_hangs|stability|bitmap_cvg) ' "$stats" || true

    # The minimised corpus (-e: edges only, hit counts ignored, which keeps
    # it small), named by content so reruns do not churn.
    min=$out/$t/cmin
    rm -rf "$min"
    nice -n 19 cargo afl cmin -e -i "$out/$t/out/default/queue" -o "$min" -t 5000 -- "$bin/$t" \
        >"$out/$t/cmin.log" 2>&1 || { tail -20 "$out/$t/cmin.log"; exit 1; }
    # The Python afl-cmin of AFL++ 4.40c can keep nothing ("0 unique tuples")
    # on a small map (the license target): then the shell one.
    if [ -z "$(ls -A "$min" 2>/dev/null)" ]; then
        rm -rf "$min"
        nice -n 19 "$afl_bin/afl-cmin.bash" -e -i "$out/$t/out/default/queue" -o "$min" -t 5000 -- "$bin/$t" \
            >>"$out/$t/cmin.log" 2>&1 || { tail -c 2000 "$out/$t/cmin.log"; exit 1; }
    fi
    rm -rf fuzz/corpus/"$t" && mkdir -p fuzz/corpus/"$t"
    for f in "$min"/*; do
        cp "$f" fuzz/corpus/"$t"/"$(sha1sum "$f" | cut -c1-16)"
    done
    echo "corpus: $(ls fuzz/corpus/"$t" | wc -l) files, $(du -sh fuzz/corpus/"$t" | cut -f1)"

    found=0
    for f in "$out/$t/out/default/crashes"/id:*; do
        [ -e "$f" ] || continue
        mkdir -p fuzz/regressions/"$t"
        cp "$f" fuzz/regressions/"$t"/crash-"$(sha1sum "$f" | cut -c1-16)"
        found=$((found + 1))
    done
    echo "crashes copied to fuzz/regressions/$t/: $found"
done
