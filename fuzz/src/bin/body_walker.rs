//! AFL++ target `body_walker`: [`helixor::fuzzing::body_walker`] on each input.
fn main() {
    // One-time set-up (the evaluator, lazy automata) before the fork server
    // starts, so that it is not paid, nor seen as coverage, per run.
    helixor::fuzzing::body_walker(br#"{"messages":[{"content":"mail jane@example.com"}]}"#);
    helixor::fuzzing::body_walker(b"");
    afl::fuzz!(|data: &[u8]| helixor::fuzzing::body_walker(data));
}
