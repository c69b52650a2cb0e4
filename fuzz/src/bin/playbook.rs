//! AFL++ target `playbook`: [`helixor::fuzzing::playbook`] on each input.
fn main() {
    // One-time set-up (fixture keys, evaluators, lazy automata) before the
    // fork server starts, so that it is not paid, nor seen as coverage, per run.
    helixor::fuzzing::playbook(b"pack_id: custom.fuzz.v1\nversion: 1\nrules:\n  - {id: t, type: regex, pattern: \x27TCK-\\d{6}\x27, action: redact}\n");
    helixor::fuzzing::playbook(b"");
    afl::fuzz!(|data: &[u8]| helixor::fuzzing::playbook(data));
}
