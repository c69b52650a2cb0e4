//! License globs ([§1](docs/formats.md#s1)): `*` any run, `?` one character, the rest
//! literal, whole-string match. Pure; no allocation.

/// Whether `text` matches the whole of `pattern`.
pub fn matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    // Position of the last `*` and the text index it was tried at: the
    // classic linear-backtracking matcher, O(len(p) * len(t)) at worst.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Whether any of `patterns` matches `text`.
pub fn any_matches<S: AsRef<str>>(patterns: &[S], text: &str) -> bool {
    patterns.iter().any(|p| matches(p.as_ref(), text))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn spec_examples() {
        assert!(matches(
            "compliance.*",
            "compliance.regulatory_pii_guard.v1"
        ));
        assert!(matches("*", ""));
        assert!(matches("a*", "a"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
        assert!(!matches("compliance.*", "custom.x"));
        assert!(!matches("abc", "abcd"));
        assert!(matches("*.v1", "custom.internal_ids.v1"));
        assert!(matches("c*m.*.v?", "custom.internal_ids.v1"));
        assert!(!matches("c*m.*.v?", "custom.internal_ids.v12"));
        assert!(matches("é?", "éé"));
    }
}
