//! Thread helpers: a [`Thread`] (a start and its DFA state), start states,
//! deduplication, terminal states, the leading word assertion at a start,
//! byte classes and small text helpers. Functions of their arguments only:
//! no session state of their own, no text kept.
//!
//! # Design
//!
//! - Each thread is a start position and the DFA state reached from it; a
//!   thread whose state is dead can never match from its start, and two
//!   threads in the same state have the same future, so only the earlier
//!   start is kept ([`dedup`]: a later start dies when the earlier one
//!   does).
//! - A state that every byte and the end of input lead to the dead state is
//!   as good as dead ([`is_terminal`]): a match that ended one character ago
//!   and that nothing can extend, e.g. after a trailing `\b` was settled.
//! - A rule's leading word assertion is checked exactly where a thread would
//!   open ([`lead_holds`]): by a table between ASCII characters, by the
//!   Unicode tables next to any other.

use regex_automata::hybrid::dfa::{Cache as LazyCache, DFA};
use regex_automata::hybrid::LazyStateID;
use regex_automata::util::look::{Look, LookMatcher};
use regex_automata::util::start;
use regex_automata::Anchored;

/// A thread: a start position of a rule and the state of its anchored DFA
/// after the bytes from there (see [`RuleState::threads`]).
///
/// [`RuleState::threads`]: super::core::RuleState::threads
#[derive(Debug, Clone, Copy)]
pub(super) struct Thread {
    /// Where the thread started (an offset in the core's buffer).
    pub(super) start: usize,
    /// Its DFA state: a dead one can never match from `start`.
    pub(super) state: LazyStateID,
    /// Whether it has reached a match state on the way: the exact search
    /// then has a match to find from `start` once the thread settles.
    pub(super) matched: bool,
}

/// The anchored start state after the look-behind byte `lb` (`None`: the
/// start of the stream), remembered in `starts` (index 256 for `None`).
#[inline]
pub(super) fn start_state(
    dfa: &DFA,
    cache: &mut LazyCache,
    starts: &mut [Option<LazyStateID>],
    lb: Option<u8>,
) -> Option<LazyStateID> {
    let k = lb.map_or(256, usize::from);
    if let Some(sid) = starts[k] {
        return Some(sid);
    }
    let cfg = start::Config::new().anchored(Anchored::Yes).look_behind(lb);
    let sid = dfa.start_state(cache, &cfg).ok()?;
    starts[k] = Some(sid);
    Some(sid)
}

/// Keeps the earliest start of threads in equal states (same future); a
/// dropped thread that saw a match passes that on to the one kept.
#[inline]
pub(super) fn dedup(threads: &mut Vec<Thread>) {
    let mut k = 1;
    while k < threads.len() {
        match threads[..k]
            .iter()
            .position(|t| t.state == threads[k].state)
        {
            Some(first) => {
                let matched = threads[k].matched;
                threads[first].matched |= matched;
                threads.remove(k);
            }
            None => k += 1,
        }
    }
}

/// Whether every byte and the end of input lead `sid` to no match and no
/// further state: nothing that arrives can change its outcome.
pub(super) fn is_terminal(dfa: &DFA, cache: &mut LazyCache, sid: LazyStateID) -> bool {
    if sid.is_dead() {
        return true;
    }
    let reps: Vec<u8> = dfa
        .byte_classes()
        .representatives(0..=255)
        .filter_map(|u| u.as_u8())
        .collect();
    // A transition may clear the cache, and `sid` is then no state of it:
    // stop at once (not terminal: the thread is kept, which only holds back).
    let clears = cache.clear_count();
    for b in reps {
        match dfa.next_state(cache, sid, b) {
            Ok(next) if next.is_dead() && cache.clear_count() == clears => {}
            _ => return false,
        }
    }
    matches!(dfa.next_eoi_state(cache, sid), Ok(next) if !next.is_match())
        && cache.clear_count() == clears
}

/// Whether the word assertion `look` holds at `j` (the characters on both
/// sides are known); ASCII neighbours are settled by `ascii` (the rule's
/// table from [`ascii_lead`]) without Unicode tables.
///
/// Inlined: it runs at most starts of a word rule (once a piece for the
/// e-mail codon), where a call cost more than the table lookup.
#[inline]
pub(super) fn lead_holds(
    looks: &LookMatcher,
    look: Look,
    ascii: Option<&[[bool; 2]; 2]>,
    bytes: &[u8],
    j: usize,
) -> bool {
    let prev = j.checked_sub(1).map(|k| bytes[k]);
    let next = bytes[j];
    match ascii {
        Some(t) if next.is_ascii() && prev.is_none_or(|p| p.is_ascii()) => {
            t[usize::from(prev.is_some_and(is_word_byte))][usize::from(is_word_byte(next))]
        }
        _ => lead_unicode(looks, look, bytes, j),
    }
}

/// [`lead_holds`] next to a non-ASCII character (or for an assertion
/// without an ASCII table): out of line, so that the common case stays small.
#[inline(never)]
fn lead_unicode(looks: &LookMatcher, look: Look, bytes: &[u8], j: usize) -> bool {
    looks.matches(look, bytes, j)
}

/// The class of a byte as the byte before a start, for
/// [`LivePlan::first_mask`]: 0 for an ASCII non-word character (or no
/// character: the start of the text), 1 for an ASCII word character, 2 for
/// a byte of another character (the assertion is then left to the start).
///
/// [`LivePlan::first_mask`]: super::plan::LivePlan::first_mask
#[inline]
pub(super) fn class_of(b: u8) -> usize {
    // Masked so that the compiler knows it indexes the four rows of
    // `first_mask` (the values are 0 to 2 already).
    usize::from(CLASSES[usize::from(b)] & 3)
}

const CLASSES: [u8; 256] = {
    let mut t = [2u8; 256];
    let mut b = 0;
    while b < 128 {
        t[b] = WORD_BYTES[b] as u8;
        b += 1;
    }
    t
};

/// Whether an ASCII word character (`\w` in ASCII).
#[inline]
pub(super) fn is_word_byte(b: u8) -> bool {
    WORD_BYTES[usize::from(b)]
}

const WORD_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_';
        b += 1;
    }
    t
};

/// The word assertion `look` between two ASCII characters, by whether each
/// is a word character; `None` for an assertion it does not know.
pub(super) fn ascii_lead(look: Look, before: bool, after: bool) -> Option<bool> {
    Some(match look {
        Look::WordAscii | Look::WordUnicode => before != after,
        Look::WordAsciiNegate | Look::WordUnicodeNegate => before == after,
        Look::WordStartAscii | Look::WordStartUnicode => !before && after,
        Look::WordEndAscii | Look::WordEndUnicode => before && !after,
        Look::WordStartHalfAscii | Look::WordStartHalfUnicode => !before,
        Look::WordEndHalfAscii | Look::WordEndHalfUnicode => !after,
        _ => return None,
    })
}

/// The code points of `s`: its length when it is ASCII, which a scan a
/// word at a time tells (cheaper than counting on short pieces).
#[inline]
pub(super) fn char_count(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

#[inline]
pub(super) fn is_continuation(b: u8) -> bool {
    (0x80..0xC0).contains(&b)
}

#[inline]
pub(super) fn next_char(text: &str, at: usize) -> usize {
    at + text[at..].chars().next().map_or(1, char::len_utf8)
}
