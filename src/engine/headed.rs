//! A pattern's matches found from its head's ends ([§6.1](docs/evaluation.md#s6-1),
//! [`crate::pattern::heads`]): the combined pass over ASCII text reported
//! where the head ends; each end proposes the starts `end - max ..= end -
//! min`, tried in order with an anchored search of the exact pattern.
//! Reads only the payload it is given; decides nothing and never keeps a
//! span past the call.

use regex_automata::hybrid::dfa::{Cache as FwdCache, DFA};
use regex_automata::meta::{Cache, Regex};
use regex_automata::{Anchored, Input};

/// What confirms a proposed start: the pattern's forward lazy DFA, when it
/// has one (a match a call, without the regex's setup), else its regex.
pub(super) struct Confirm<'a> {
    pub re: &'a Regex,
    pub cache: &'a mut Cache,
    pub fwd: Option<(&'a DFA, &'a mut FwdCache)>,
}

impl Confirm<'_> {
    /// The end of the leftmost-first match starting at `s`, if any.
    fn end_from(&mut self, text: &str, s: usize) -> Option<usize> {
        let input = Input::new(text).range(s..).anchored(Anchored::Yes);
        if let Some((dfa, cache)) = self.fwd.as_mut() {
            // A give-up (none on ASCII text) asks the regex.
            if let Ok(found) = dfa.try_search_fwd(cache, &input) {
                return found.map(|h| h.offset());
            }
        }
        self.re.search_with(self.cache, &input).map(|m| m.end())
    }
}

/// Why the proposed starts were left: too many failed, and the rest of the
/// text, from the byte after the last one tried, must be searched as a
/// whole search would.
pub(super) struct Unfinished(pub usize);

/// Most ends of the head whose proposed starts may all fail, on a text of
/// `len` bytes, before the rest is searched whole: each costs up to four
/// anchored searches of at most the pattern's longest match (or, for an
/// open-ended one, up to where its open part stops), and a text full of
/// heads that lead nowhere must not cost much more than the one search
/// they replace.
fn failures_allowed(len: usize) -> usize {
    16 + len / 256
}

/// The leftmost-first matches of a pattern (never empty; `confirm` runs
/// it) in ASCII `text`, where every match starts `min..=max` bytes before one of
/// `ends` (ascending): the ends of its head. Pushed to `out` (emptied
/// first); `Err` when too many ends led to no match, with the matches
/// before the point it names in `out`.
pub(super) fn search(
    confirm: &mut Confirm<'_>,
    text: &str,
    ends: &[usize],
    (min, max): (usize, usize),
    out: &mut Vec<(usize, usize)>,
) -> Result<(), Unfinished> {
    out.clear();
    let mut failed = 0;
    let allowed = failures_allowed(text.len());
    // Every start before `next` was tried, or lies inside a match.
    let mut next = 0;
    for &e in ends {
        let Some(last) = e.checked_sub(min) else {
            continue;
        };
        let mut s = e.saturating_sub(max).max(next);
        if s > last {
            continue;
        }
        loop {
            if let Some(end) = confirm.end_from(text, s).filter(|&end| end > s) {
                out.push((s, end));
                next = end;
                break;
            }
            s += 1;
            next = s;
            if s > last {
                failed += 1;
                if failed > allowed {
                    return Err(Unfinished(s));
                }
                break;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::{self, ends};

    type Spans = Vec<(usize, usize)>;

    /// What `search` finds, and what a whole search finds.
    fn both(src: &str, text: &str) -> (Spans, Spans) {
        let compiled = pattern::compile(src, &[]).unwrap();
        let head = compiled.head.clone().expect("a head");
        let dfa = ends::build(&[&head.src]).unwrap();
        let mut pass_cache = ends::PassCache::new(&dfa);
        let ends::Pass::Known(found) =
            ends::pass(&dfa, &mut pass_cache, text, &[Some(head.max)], 1 << 20)
        else {
            panic!("the pass gave up on {text:?}");
        };
        let re = &compiled.exact;
        let want: Spans = re.find_iter(text).map(|m| (m.start(), m.end())).collect();
        // Confirmed by the forward lazy DFA, and by the regex alone: alike.
        let dfa = pattern::build_forward(&compiled.exact_src).unwrap();
        let mut got = Vec::new();
        for with_dfa in [true, false] {
            let mut cache = re.create_cache();
            let mut dfa_cache = dfa.create_cache();
            let mut confirm = Confirm {
                re,
                cache: &mut cache,
                fwd: with_dfa.then_some((&dfa, &mut dfa_cache)),
            };
            let mut spans = vec![(1, 2)];
            let done = search(
                &mut confirm,
                text,
                &found.ends[0],
                (head.min, head.max),
                &mut spans,
            );
            if let Err(Unfinished(from)) = done {
                let rest = re.find_iter(Input::new(text).range(from..));
                spans.extend(rest.map(|m| (m.start(), m.end())));
            }
            if with_dfa {
                got = spans;
            } else {
                assert_eq!(spans, got, "{src} on {text:?}: the DFA and the regex");
            }
        }
        (got, want)
    }

    const IBAN: &str = r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b";
    const SECRET: &str = r#"(?i)\b(?:password|passwd|secret|api_key)\s*[:=]\s*"?([^\s"]{8,64})"#;

    #[test]
    fn matches_from_the_heads_ends_are_the_whole_searchs() {
        let cases: &[(&str, &[&str])] = &[
            (
                IBAN,
                &[
                    "IBAN DE89 3704 0044 0532 0130 00; near DE88 3704 0044 0532 0130 00.",
                    "DE89370400440532013000 GB82WEST12345698765432",
                    // Heads inside a match, and a head that leads nowhere.
                    "DE89 DE89 DE89 DE89 AB12 x",
                    "XX12 3456 7890 1234 5678 9012 3456 7890 1234 5",
                    "AB12",
                    "",
                ],
            ),
            (
                SECRET,
                &[
                    "password=S3cr3t!Passw0rd; secret : \"abcdefghij\" api_key=short",
                    "PASSWD:12345678 passwd =  xyzxyzxyz",
                    "xpassword=abcdefghijk password password=",
                ],
            ),
        ];
        for &(src, texts) in cases {
            for &text in texts {
                let (got, want) = both(src, text);
                assert_eq!(got, want, "{src} on {text:?}");
            }
        }
    }

    #[test]
    fn too_many_failed_starts_leave_the_rest_to_a_whole_search() {
        let compiled = pattern::compile(IBAN, &[]).unwrap();
        let re = &compiled.exact;
        let mut cache = re.create_cache();
        let mut confirm = Confirm {
            re,
            cache: &mut cache,
            fwd: None,
        };
        // Heads that lead nowhere, at every fifth byte.
        let text = "AB12;".repeat(40);
        let ends: Vec<usize> = (0..40).map(|k| 5 * k + 4).collect();
        let mut out = Vec::new();
        let r = search(&mut confirm, &text, &ends, (4, 4), &mut out);
        // 16 heads may lead nowhere on 200 bytes; the 17th, at byte 80,
        // hands the rest from byte 81 to a whole search.
        assert!(matches!(r, Err(Unfinished(81))));
        assert!(out.is_empty());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// On random text dense with heads, what the heads' ends find is
        /// what a whole search finds.
        #[test]
        fn heads_find_what_a_whole_search_finds(
            iban in "(?:[A-C]{1,2}[0-9]{2}| ?[A-C0-9]{1,4}| |;){0,40}",
            secret in "(?:(?:passwd|Secret|api_key)|[:=]| {1,3}|\"|[a-c0-9!]{1,9}|\\.){0,30}",
        ) {
            let (got, want) = both(IBAN, &iban);
            proptest::prop_assert_eq!(got, want);
            let (got, want) = both(SECRET, &secret);
            proptest::prop_assert_eq!(got, want);
        }
    }
}
