//! AFL++ target `license`: [`helixor::fuzzing::license`] on each input.
fn main() {
    // One-time set-up (fixture keys, evaluators, lazy automata) before the
    // fork server starts, so that it is not paid, nor seen as coverage, per run.
    helixor::fuzzing::license(helixor::fuzzing::fixture_license_json().as_bytes());
    helixor::fuzzing::license(b"");
    afl::fuzz!(|data: &[u8]| helixor::fuzzing::license(data));
}
