//! AFL++ target `container`: [`helixor::fuzzing::container`] on each input.
fn main() {
    // One-time set-up (fixture keys, evaluators, lazy automata) before the
    // fork server starts, so that it is not paid, nor seen as coverage, per run.
    helixor::fuzzing::container(br#"{"pack_id":"fuzz.pack.v1","version":1,"rules":[]}"#);
    helixor::fuzzing::container(b"");
    afl::fuzz!(|data: &[u8]| helixor::fuzzing::container(data));
}
