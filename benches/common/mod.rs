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

/// English prose with nothing to find.
#[allow(dead_code)] // each bench binary uses some of these
pub const ENGLISH: &str =
    "The quarterly planning meeting moved to the large room on the third floor. \
Please bring the draft roadmap, the notes from last week and any questions about the hiring plan. \
We will review customer feedback, agree on priorities for the next release and assign owners. ";

/// Multilingual prose with nothing to find.
#[allow(dead_code)]
pub const MIXED: &str =
    "Die Überprüfung der Verträge läuft; café crème für alle. 会議は午後三時に始まります。 \
Señor Núñez enviará el informe mañana. 我们下周讨论预算和招聘计划。 Ещё раз спасибо за помощь. \
Réunion à neuf heures, ordre du jour ci-joint. ";

/// A line dense with the example pack's values.
#[allow(dead_code)]
pub const PII: &str =
    "SSN 123-45-6789, card 4111 1111 1111 1111, MRN: 12345678, mail jane.doe@example.com, \
call (212) 555-0199 or 415.555.0123, host 192.168.10.20, ticket TCK-004211, acct ACCT-12345678. ";
