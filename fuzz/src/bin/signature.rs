//! AFL++ target `signature`: [`helixor::fuzzing::signature`] on each input.
fn main() {
    // One-time set-up (the fixture pack, keys) before the fork server starts.
    helixor::fuzzing::signature(helixor::fuzzing::fixture_signature().as_bytes());
    helixor::fuzzing::signature(b"");
    afl::fuzz!(|data: &[u8]| helixor::fuzzing::signature(data));
}
