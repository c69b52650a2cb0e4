//! Helpers shared by the benchmarks.

/// `unit` repeated to `bytes` bytes, cut back to a code-point boundary.
pub fn fill(unit: &str, bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + unit.len());
    while s.len() < bytes {
        s.push_str(unit);
    }
    let mut end = bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s
}
