//! The decision object of [§6.4](docs/evaluation.md#s6-4) and its parts. Borrowed from the
//! evaluator where it can be, so a request allocates only what it returns.

use serde::Serialize;

/// A trigger's or decision's severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Severity {
    /// Blocks the payload.
    #[serde(rename = "FATAL")]
    Fatal,
    /// Redacts and permits.
    #[serde(rename = "WARNING")]
    Warning,
}

impl Severity {
    /// `FATAL` or `WARNING`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fatal => "FATAL",
            Self::Warning => "WARNING",
        }
    }
}

/// Where a trigger comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// One of the playbook's `rules`.
    Rule,
    /// One of the built-in hard rules.
    Builtin,
    /// A hard rule of a version-2 playbook's own ([§16.3](docs/codons.md#s16-3)).
    #[serde(rename = "hard_rule")]
    HardRule,
}

/// One rule that matched at least once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trigger<'e> {
    /// Custom rule id or hard rule id.
    pub rule_id: &'e str,
    /// `rule`, `builtin` or `hard_rule`.
    pub source: Source,
    /// The rule's severity.
    pub severity: Severity,
    /// The action the rule would decide.
    pub action: &'e str,
    /// Hard-rule triggers: the codes of the matched codons its positive
    /// tests read, in codon order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codons: Option<Vec<&'e str>>,
    /// Number of spans.
    pub match_count: usize,
    /// `[start, end)` in code points, sorted by start then end.
    pub spans: Vec<[usize; 2]>,
}

impl<'e> Trigger<'e> {
    /// The trigger of hard rule `hr`: the codes of the matched codons its
    /// positive tests read, and their values' spans in code points (sorted).
    pub(crate) fn of_hard_rule(
        hr: &'e crate::program::HardRule,
        codons: Vec<&'e str>,
        spans: Vec<[usize; 2]>,
    ) -> Self {
        Self {
            rule_id: &hr.id,
            source: if hr.builtin {
                Source::Builtin
            } else {
                Source::HardRule
            },
            severity: if hr.fatal {
                Severity::Fatal
            } else {
                Severity::Warning
            },
            action: &hr.action,
            codons: Some(codons),
            match_count: spans.len(),
            spans,
        }
    }
}

/// The outcome of evaluating one payload ([§6.4](docs/evaluation.md#s6-4)).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision<'e> {
    /// The deciding action, or `permit_clean_payload`.
    pub action: &'e str,
    /// The deciding trigger's severity; `null` on permit.
    pub severity: Option<Severity>,
    /// The deciding trigger's reason; `null` on permit.
    pub reason: Option<&'e str>,
    /// What may leave: the payload, redacted, or the blocked placeholder.
    pub clean_text: String,
    /// Every rule that matched, custom rules first.
    pub triggers: Vec<Trigger<'e>>,
    /// True only on permit.
    pub invariants_passed: bool,
    /// The pack that decided.
    pub pack_id: &'e str,
    /// The playbook's version as text.
    pub pack_version: &'e str,
    /// The `helixor.decision_receipt.v1` fingerprint.
    pub receipt_hash: String,
    /// Engine time in microseconds.
    pub latency_us: f64,
    /// Whether rules ran on a normalized view that differed from the text
    /// ([§15](docs/evasion.md#s15)); written only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub normalized: bool,
}

/// The action of a payload that broke no rule.
pub const PERMIT_ACTION: &str = "permit_clean_payload";
/// `clean_text` of a blocked payload.
pub const BLOCKED_TEXT: &str = "[BLOCKED: Prohibited Content]";
