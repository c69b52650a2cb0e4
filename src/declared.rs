//! Reading one declared field of a playbook ([§4.1](docs/formats.md#s4-1), [§4.2](docs/formats.md#s4-2)): flag lists,
//! patterns under the cost check, the built-in codons' compiled patterns and
//! equality as parsed data. Shared by the checks of custom rules
//! ([`crate::rules`]) and of codons and hard rules ([`crate::program`]);
//! it knows neither, and never quotes a pattern in a problem.

use crate::builtins;
use crate::pattern::{self, CompiledPattern, Flag};
use serde_json::Value;
use std::sync::OnceLock;

/// The six codons' compiled patterns, in [`builtins::CODONS`] order (every
/// evaluator runs them, whatever the pack declares).
pub(crate) fn codon_patterns() -> Result<&'static [CompiledPattern], String> {
    static COMPILED: OnceLock<Result<Vec<CompiledPattern>, String>> = OnceLock::new();
    COMPILED
        .get_or_init(|| {
            builtins::CODONS
                .iter()
                .map(|c| {
                    let flags: &[Flag] = if c.ignore_case {
                        &[Flag::IgnoreCase]
                    } else {
                        &[]
                    };
                    pattern::compile(c.pattern, flags)
                        .map_err(|e| format!("built-in codon {}: {e}", c.code))
                })
                .collect()
        })
        .as_deref()
        .map_err(Clone::clone)
}

/// Reads a list of flag names ([§4.1](docs/formats.md#s4-1)), recording what is wrong with it.
pub(crate) fn read_flags(
    value: Option<&Value>,
    place: &str,
    key: &str,
    problems: &mut Vec<String>,
) -> Vec<Flag> {
    let mut flags = Vec::new();
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for f in items {
                match f.as_str().map(|s| (s, Flag::parse(s))) {
                    Some((_, Some(flag))) => flags.push(flag),
                    Some((s, None)) => problems.push(format!(
                        "{place}: unknown flag `{s}` (supported: IGNORECASE, MULTILINE, DOTALL)"
                    )),
                    None => problems.push(format!("{place}: `{key}` is not a list of strings")),
                }
            }
        }
        Some(_) => problems.push(format!("{place}: `{key}` is not a list of strings")),
    }
    flags
}

/// Compiles a rule's or codon's pattern under [§4.2](docs/formats.md#s4-2) and its cost
/// check ([§11.4](docs/limits.md#s11-4)), recording why it is refused (never quoting it).
pub(crate) fn compile_pattern(
    value: Option<&Value>,
    flags: &[Flag],
    place: &str,
    key: &str,
    problems: &mut Vec<String>,
) -> Option<CompiledPattern> {
    match value {
        Some(Value::String(p)) => match pattern::compile(p, flags).and_then(|c| {
            // [§11.4](docs/limits.md#s11-4): no pattern that can make an evaluation slow.
            pattern::check_cost(&c)?;
            Ok(c)
        }) {
            Ok(c) => Some(c),
            Err(why) => {
                problems.push(format!("{place}: `{key}` {why}"));
                None
            }
        },
        Some(_) => {
            problems.push(format!("{place}: `{key}` is not a string"));
            None
        }
        None => {
            problems.push(format!("{place}: missing `{key}`"));
            None
        }
    }
}

/// Equality "as parsed data": numbers compare by value, as Python's `==` does (`1 == 1.0`).
pub(crate) fn same_data(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_data(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_data(v, w)))
        }
        _ => a == b,
    }
}
