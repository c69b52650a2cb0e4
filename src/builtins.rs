//! The example pack's six codons and four hard rules ([§6.1](docs/evaluation.md#s6-1)): the
//! engine's table of them, and the reference declarations a playbook's
//! `codons`/`hard_rules` entries must equal. Static data only.

use serde_json::{Map, Value};
use std::sync::OnceLock;

/// The built-in example pack's playbook, as shipped in `reference/`.
pub const EXAMPLE_PLAYBOOK_YAML: &str = include_str!("../assets/regulatory_pii_guard.yaml");
/// The example pack's id.
pub const EXAMPLE_PACK_ID: &str = "compliance.regulatory_pii_guard.v1";

/// A post-match check on a candidate's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validator {
    /// Every candidate counts.
    None,
    /// The candidate's ASCII digits must pass Luhn.
    Luhn,
    /// SSN area/group/serial exclusions (the reference's look-aheads).
    Ssn,
}

/// One built-in codon.
#[derive(Debug, Clone, Copy)]
pub struct Codon {
    /// `PII_SSN_EXTRACT`, …
    pub code: &'static str,
    /// The state field it sets.
    pub binds: &'static str,
    /// The pattern in Rust syntax (the reference's, look-aheads moved into `validator`).
    pub pattern: &'static str,
    /// Whether the pattern is case-insensitive.
    pub ignore_case: bool,
    /// Post-match check.
    pub validator: Validator,
    /// Redaction placeholder.
    pub placeholder: &'static str,
    /// Display name of its category (HTTP `remedy`).
    pub category: &'static str,
    /// `state_schema` description (manifest).
    pub description: &'static str,
}

/// The six codons, in the example pack's order.
pub const CODONS: [Codon; 6] = [
    Codon {
        code: "PII_SSN_EXTRACT",
        binds: "has_ssn",
        pattern: r"\b\d{3}-\d{2}-\d{4}\b",
        ignore_case: false,
        validator: Validator::Ssn,
        placeholder: "[REDACTED_SSN]",
        category: "SSN (GLBA/FCRA)",
        description: "SSN detected (GLBA/FCRA)",
    },
    Codon {
        code: "PII_CARD_EXTRACT",
        binds: "has_credit_card",
        pattern: r"\b(?:\d{4}[-\s]?){3}\d{4}\b",
        ignore_case: false,
        validator: Validator::Luhn,
        placeholder: "[REDACTED_CARD_PAN]",
        category: "Card PAN (PCI-DSS)",
        description: "Card PAN detected (PCI-DSS)",
    },
    Codon {
        code: "PII_HEALTH_EXTRACT",
        binds: "has_health_record",
        pattern: r"\b(?:MRN|EHR|RX)[-:]?\s*\d{6,10}\b",
        ignore_case: true,
        validator: Validator::None,
        placeholder: "[REDACTED_HEALTH_ID]",
        category: "Protected Health Info (HIPAA)",
        description: "Health record identifier detected (HIPAA)",
    },
    Codon {
        code: "PII_EMAIL_EXTRACT",
        binds: "has_email",
        pattern: r"\b[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9\-.]+\b",
        ignore_case: true,
        validator: Validator::None,
        placeholder: "[REDACTED_EMAIL]",
        category: "Email (GDPR/CCPA)",
        description: "Email address detected (GDPR/CCPA)",
    },
    Codon {
        code: "PII_PHONE_EXTRACT",
        binds: "has_phone",
        pattern: r"(?:\+?1[-.\s]?)?(?:\([2-9]\d{2}\)|[2-9]\d{2})[-.\s]?\d{3}[-.\s]?\d{4}\b",
        ignore_case: false,
        validator: Validator::None,
        placeholder: "[REDACTED_PHONE]",
        category: "Telephone (TCPA/CCPA)",
        description: "Telephone number detected (TCPA/CCPA)",
    },
    Codon {
        code: "PII_IPV4_EXTRACT",
        binds: "has_ip",
        pattern: r"\b(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\b",
        ignore_case: false,
        validator: Validator::None,
        placeholder: "[REDACTED_IP]",
        category: "IP Address (GDPR)",
        description: "IPv4 address detected (GDPR)",
    },
];

/// One built-in hard rule.
#[derive(Debug, Clone, Copy)]
pub struct HardRule {
    /// `RULE-GLBA-SSN-BLOCK`, …
    pub id: &'static str,
    /// Indices into [`CODONS`] whose state it reads.
    pub codons: &'static [usize],
    /// FATAL (block) or WARNING (redact).
    pub fatal: bool,
    /// The action it decides.
    pub action: &'static str,
    /// The decision's reason.
    pub reason: &'static str,
    /// The manifest's condition text.
    pub condition: &'static str,
}

/// The four hard rules, in evaluation order.
pub const HARD_RULES: [HardRule; 4] = [
    HardRule {
        id: "RULE-GLBA-SSN-BLOCK",
        codons: &[0],
        fatal: true,
        action: "block_glba_ssn_leakage",
        reason: "Statutory violation: Social Security Number (GLBA / FCRA) detected",
        condition: "state.has_ssn is True",
    },
    HardRule {
        id: "RULE-PCI-DSS-PAN-BLOCK",
        codons: &[1],
        fatal: true,
        action: "block_pci_dss_pan_leakage",
        reason: "Statutory violation: Credit Card PAN (PCI-DSS Requirement 3) detected",
        condition: "state.has_credit_card is True",
    },
    HardRule {
        id: "RULE-HIPAA-PHI-BLOCK",
        codons: &[2],
        fatal: true,
        action: "block_hipaa_phi_leakage",
        reason: "Statutory violation: Protected Health Information (HIPAA) detected",
        condition: "state.has_health_record is True",
    },
    HardRule {
        id: "RULE-GDPR-CONTACT-REDACT",
        codons: &[3, 4, 5],
        fatal: false,
        action: "redact_and_permit_contact_pii",
        reason: "Regulatory notice: Direct online/contact identifier requires in-place redaction prior to egress",
        condition: "state.has_email is True or state.has_phone is True or state.has_ip is True",
    },
];

/// The reference declarations, keyed by codon `code` and hard rule `id`.
#[derive(Debug, Default)]
pub struct ReferenceDeclarations {
    /// Codon entries by `code`.
    pub codons: Map<String, Value>,
    /// Hard-rule entries by `id`.
    pub hard_rules: Map<String, Value>,
}

/// The example playbook's declarations, parsed once.
pub fn reference() -> &'static ReferenceDeclarations {
    static REF: OnceLock<ReferenceDeclarations> = OnceLock::new();
    REF.get_or_init(|| {
        let mut out = ReferenceDeclarations::default();
        let Ok(doc) = crate::playbook::parse_yaml(
            EXAMPLE_PLAYBOOK_YAML.as_bytes(),
            "built-in example playbook",
        ) else {
            return out;
        };
        let index = |key: &str, field: &str, into: &mut Map<String, Value>| {
            if let Some(Value::Array(items)) = doc.get(key) {
                for item in items {
                    if let Some(k) = item.get(field).and_then(Value::as_str) {
                        into.insert(k.to_string(), item.clone());
                    }
                }
            }
        };
        index("codons", "code", &mut out.codons);
        index("hard_rules", "id", &mut out.hard_rules);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_has_six_codons_and_four_rules_in_engine_order() {
        let r = reference();
        assert_eq!(r.codons.len(), 6);
        assert_eq!(r.hard_rules.len(), 4);
        for c in CODONS {
            assert!(r.codons.contains_key(c.code), "{}", c.code);
            assert_eq!(r.codons[c.code]["binds_to"], c.binds);
            assert_eq!(r.codons[c.code]["remedy_template"], c.placeholder);
        }
        for h in HARD_RULES {
            assert_eq!(r.hard_rules[h.id]["action"], h.action);
            assert_eq!(r.hard_rules[h.id]["description"], h.reason);
        }
    }
}
