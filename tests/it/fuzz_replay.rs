//! Replays every file of `fuzz/seeds/<target>/`, `fuzz/corpus/<target>/`
//! and `fuzz/regressions/<target>/` through the fuzz harnesses
//! (`helixor::fuzzing`), so an input that once broke an invariant stays a
//! test, and the minimised corpus keeps running under `cargo test`.
//!
//! A replay that runs nothing cannot fail, so each kind must be there, each
//! target must have at least one input of each kind, every entry of a
//! target's folder must be a file, every folder must name a target, and
//! each harness must have run exactly as many times as its folder holds
//! files.

use helixor::fuzzing::{Harness, TARGETS};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    crate::support::repo_path("fuzz")
}

/// Names in the input folders that are not inputs.
const NOT_INPUTS: [&str; 2] = ["README.md", ".gitkeep"];

/// The inputs of `dir`: every entry but [`NOT_INPUTS`], sorted; each must
/// be a file (none is skipped). None when `dir` does not exist.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| NOT_INPUTS.iter().any(|x| n == *x))
        })
        .collect();
    for p in &out {
        assert!(p.is_file(), "{} is not an input file", p.display());
    }
    out.sort();
    out
}

/// The inputs of `fuzz/<kind>/`, per target in [`TARGETS`] order. Fails
/// when `fuzz/<kind>/` does not exist or holds a folder that names no
/// target (an input there would never run).
fn inputs(kind: &str) -> Vec<(&'static str, Harness, Vec<PathBuf>)> {
    let dir = fuzz_dir().join(kind);
    assert!(dir.is_dir(), "{} is missing", dir.display());
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                TARGETS.iter().any(|(t, _)| *t == name),
                "{} names no fuzz target",
                path.display()
            );
        }
    }
    TARGETS
        .iter()
        .map(|&(name, harness)| (name, harness, files(&dir.join(name))))
        .collect()
}

/// Runs every input through its target's harness, the inputs shared among
/// one thread per core (a debug build spends most of the time building the
/// engines of the packs that load); returns how many runs each target's
/// harness completed, in [`TARGETS`] order.
fn replay(inputs: &[(&'static str, Harness, Vec<PathBuf>)]) -> Vec<usize> {
    let jobs: Vec<(usize, &str, Harness, &PathBuf)> = inputs
        .iter()
        .enumerate()
        .flat_map(|(t, (name, harness, files))| files.iter().map(move |p| (t, *name, *harness, p)))
        .collect();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (runs, failures) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let jobs = &jobs;
                s.spawn(move || {
                    let mut runs = vec![0usize; inputs.len()];
                    let mut failed = Vec::new();
                    for &(t, name, harness, path) in jobs.iter().skip(i).step_by(threads) {
                        let data = std::fs::read(path).unwrap();
                        if std::panic::catch_unwind(|| harness(&data)).is_err() {
                            failed
                                .push(format!("{} broke an invariant of `{name}`", path.display()));
                        }
                        runs[t] += 1;
                    }
                    (runs, failed)
                })
            })
            .collect();
        let mut runs = vec![0usize; inputs.len()];
        let mut failures = Vec::new();
        for w in workers {
            let (r, f) = w.join().unwrap();
            for (total, n) in runs.iter_mut().zip(r) {
                *total += n;
            }
            failures.extend(f);
        }
        (runs, failures)
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    runs
}

/// Replays `fuzz/<kind>/`: every target has an input, and its harness ran
/// once for each of them.
fn replays_every_input(kind: &str) {
    let inputs = inputs(kind);
    let runs = replay(&inputs);
    for ((name, _, files), ran) in inputs.iter().zip(runs) {
        assert!(!files.is_empty(), "no input under fuzz/{kind}/{name}/");
        assert_eq!(
            ran,
            files.len(),
            "fuzz/{kind}/{name}/: {} inputs, {ran} runs",
            files.len()
        );
    }
}

#[test]
fn corpus_replays_without_a_broken_invariant() {
    replays_every_input("corpus");
}

#[test]
fn regressions_replay_without_a_broken_invariant() {
    replays_every_input("regressions");
}

#[test]
fn seeds_replay_without_a_broken_invariant() {
    replays_every_input("seeds");
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
    let root = crate::support::root();
    let seeds = fuzz_dir().join("seeds");
    for dir in ["container", "license", "signature"] {
        std::fs::create_dir_all(seeds.join(dir)).unwrap();
    }
    std::fs::write(
        seeds.join("signature/fixture.sig"),
        helixor::fuzzing::fixture_signature(),
    )
    .unwrap();
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
