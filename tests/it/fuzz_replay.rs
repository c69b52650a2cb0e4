//! Replays every file of `fuzz/corpus/<target>/` and
//! `fuzz/regressions/<target>/` through the fuzz harnesses
//! (`helixor::fuzzing`), so an input that once broke an invariant stays a
//! test, and the minimised corpus keeps running under `cargo test`.

use helixor::fuzzing::{Harness, TARGETS};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files directly under `dir` (none if it does not exist), sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_file()
                && !p
                    .file_name()
                    .is_some_and(|n| n == "README.md" || n == ".gitkeep")
        })
        .collect();
    out.sort();
    out
}

/// Runs every file of `fuzz/<kind>/<target>/` through its harness, the files
/// shared among one thread per core (a debug build spends most of the time
/// building the engines of the packs that load); returns how many ran.
fn replay(kind: &str) -> usize {
    let mut jobs: Vec<(&str, Harness, PathBuf)> = Vec::new();
    for (name, harness) in TARGETS {
        for path in files(&fuzz_dir().join(kind).join(name)) {
            jobs.push((name, harness, path));
        }
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let failures: Vec<String> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let jobs = &jobs;
                s.spawn(move || {
                    let mut failed = Vec::new();
                    for (name, harness, path) in jobs.iter().skip(i).step_by(threads) {
                        let data = std::fs::read(path).unwrap();
                        if std::panic::catch_unwind(|| harness(&data)).is_err() {
                            failed
                                .push(format!("{} broke an invariant of `{name}`", path.display()));
                        }
                    }
                    failed
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    jobs.len()
}

#[test]
fn corpus_replays_without_a_broken_invariant() {
    let n = replay("corpus");
    assert!(
        n >= TARGETS.len(),
        "only {n} corpus files under fuzz/corpus/"
    );
}

#[test]
fn regressions_replay_without_a_broken_invariant() {
    // As many as are committed: a replay that finds none cannot fail.
    let committed = TARGETS
        .iter()
        .map(|(name, _)| files(&fuzz_dir().join("regressions").join(name)).len())
        .sum::<usize>();
    assert!(committed > 0, "no file under fuzz/regressions/<target>/");
    assert_eq!(replay("regressions"), committed);
}

#[test]
fn seeds_replay_without_a_broken_invariant() {
    let n = replay("seeds");
    assert!(n >= TARGETS.len(), "only {n} seed files under fuzz/seeds/");
}

#[test]
fn every_target_has_a_binary_and_seeds() {
    for (name, _) in TARGETS {
        assert!(
            fuzz_dir()
                .join("src/bin")
                .join(format!("{name}.rs"))
                .is_file(),
            "{name}"
        );
        assert!(
            !files(&fuzz_dir().join("seeds").join(name)).is_empty(),
            "no seeds for {name}"
        );
    }
}

/// The fixture-sealed seeds open with the fixture license: the
/// `container` target starts past the decryption.
#[test]
fn fixture_sealed_seeds_load() {
    let mut n = 0;
    for p in files(&fuzz_dir().join("seeds/container")) {
        if p.to_string_lossy().ends_with(".fixture.hxpack") {
            let bytes = std::fs::read(&p).unwrap();
            helixor::load_pack(&bytes, "seed", helixor::fuzzing::fixture_license()).unwrap();
            n += 1;
        }
    }
    assert!(n > 0, "no fixture-sealed seed");
}

/// Writes the seeds that need the harnesses' fixed keys: the demo
/// playbooks sealed for the fixture license, and the fixture license.
/// Run by `scripts/fuzz.sh seeds` (`--ignored`), not by CI.
#[test]
#[ignore = "writes fuzz/seeds/; run by scripts/fuzz.sh seeds"]
fn write_fixture_seeds() {
    use helixor::{compile_in_memory, Entitlement};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let seeds = fuzz_dir().join("seeds");
    for dir in ["container", "license"] {
        std::fs::create_dir_all(seeds.join(dir)).unwrap();
    }
    std::fs::write(
        seeds.join("license/fixture.hxlic"),
        helixor::fuzzing::fixture_license_json(),
    )
    .unwrap();
    let mut playbooks = files(&root.join("config/demo/playbooks"));
    playbooks.extend(files(&root.join("tests/fixtures")));
    for p in playbooks {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with(".yaml") || name.ends_with(".test.yaml") {
            continue;
        }
        let bytes = std::fs::read(&p).unwrap();
        let Ok(c) = compile_in_memory(&bytes, &name, Entitlement::PolicyTest) else {
            continue;
        };
        let stem = name.trim_end_matches(".yaml");
        let sealed = helixor::fuzzing::seal_for_fixture(&c.pack_id, &c.plaintext).unwrap();
        std::fs::write(
            seeds.join(format!("container/{stem}.fixture.hxpack")),
            sealed,
        )
        .unwrap();
        std::fs::write(
            seeds.join(format!("container/{stem}.plain.json")),
            &*c.plaintext,
        )
        .unwrap();
    }
}
