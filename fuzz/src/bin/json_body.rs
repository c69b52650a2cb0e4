//! AFL++ target `json_body`: [`helixor::fuzzing::json_body`] on each input.
fn main() {
    // One-time set-up (fixture keys, evaluators, lazy automata) before the
    // fork server starts, so that it is not paid, nor seen as coverage, per run.
    helixor::fuzzing::json_body(br#"{"text":"jane@example.com","pack_id":null}"#);
    helixor::fuzzing::json_body(b"");
    afl::fuzz!(|data: &[u8]| helixor::fuzzing::json_body(data));
}
