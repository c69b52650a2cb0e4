//! AFL++ target `stream`: [`helixor::fuzzing::stream`] on each input.
fn main() {
    // One-time set-up (fixture keys, evaluators, lazy automata) before the
    // fork server starts, so that it is not paid, nor seen as coverage, per run.
    helixor::fuzzing::stream(
        b"\x01\x01\x03\xffjane.doe@example.com TCK-123456 4111 1111 1111 1111 secret",
    );
    helixor::fuzzing::stream(b"\x02\x05\xffCall (415) 555-0123, SSN 123-45-6789.");
    helixor::fuzzing::stream(b"");
    afl::fuzz!(|data: &[u8]| helixor::fuzzing::stream(data));
}
