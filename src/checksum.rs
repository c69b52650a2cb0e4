//! Check-digit validators of [§16.2](docs/codons.md#s16-2): the `checksum` key of a
//! version-2 codon. A [`Checksum`] is parsed once from the playbook
//! ([`Checksum::from_yaml`]) and then judges candidate values
//! ([`Checksum::check`]).
//!
//! This module only judges strings: it must not touch the engine, the
//! compiler, playbooks or any I/O, it allocates nothing per check (a value's
//! compact form goes into a 64-byte stack buffer) and it never panics.
//!
//! Every validator runs on the value's **compact form**: the value with
//! spaces (U+0020), `-`, `.` and `/` removed. A compact form longer than 64
//! characters, or holding a character the algorithm does not take (any
//! non-ASCII character included), fails. Letters are case-insensitive
//! except the `X` of `iso7064_mod11_2`, which [§16.2](docs/codons.md#s16-2) wants upper case.
//! `python-stdnum` is the oracle: `scripts/checksum-oracle.sh` regenerates
//! `tests/checksum/cases.json` and the IBAN registry.

mod iban_registry;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

/// The longest compact form any validator takes; a longer one fails.
pub const MAX_COMPACT_LEN: usize = 64;

/// The most weights a weighted validator may have.
pub const MAX_WEIGHTS: usize = 64;

/// A check-digit validator of [§16.2](docs/codons.md#s16-2) (the `checksum` key of a codon).
///
/// Every variant judges the value's compact form (see [`Checksum::check`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Checksum {
    /// `luhn`: only digits, at least two, the Luhn sum ≡ 0 (mod 10).
    Luhn,
    /// `verhoeff`: only digits, at least two, the Verhoeff check holds.
    Verhoeff,
    /// `damm`: only digits, at least two, the Damm check is 0.
    Damm,
    /// `mod97`: digits and letters (A–Z as 10–35, case-insensitive), at least
    /// one, ISO 7064 MOD 97-10 of the number ≡ 1.
    Mod97,
    /// `iban`: a country code of the IBAN registry (letters, either case),
    /// two digits, then exactly the country's BBAN length of digits and
    /// letters; `mod97` of the value with its first four characters moved
    /// to the end. National check digits inside the BBAN are not checked.
    Iban,
    /// `iso7064_mod11_10`: only digits, at least one, ISO 7064 MOD 11,10
    /// holds.
    Iso7064Mod11_10,
    /// `iso7064_mod11_2`: digits, at least one, the last of which may be an
    /// upper-case `X` (10); ISO 7064 MOD 11-2 holds.
    Iso7064Mod11_2,
    /// `{weights: [w₁…wₙ], modulus: m, remainder: r}`: exactly n digits
    /// d₁…dₙ with Σ wᵢ·dᵢ ≡ r (mod m). Build it with [`Checksum::weighted`],
    /// which checks the bounds; a value built by hand with modulus 0 or 1,
    /// no weights, more than [`MAX_WEIGHTS`] weights or r ≥ m passes nothing.
    Weighted {
        /// w₁…wₙ, one per digit, left to right.
        weights: Vec<u32>,
        /// m, at least 2.
        modulus: u32,
        /// r, below m.
        remainder: u32,
    },
    /// `es_nif`: a Spanish natural person's NIF with its check letter
    /// (`TRWAGMYFPDXBNJZSQVHLCKE`[n mod 23]): a DNI (8 digits and the
    /// letter), an NIE (`X`, `Y` or `Z` read as 0, 1, 2, 7 digits and the
    /// letter) or a `K`, `L` or `M` NIF (the letter, 7 digits and the DNI
    /// letter of those 7 digits). A legal entity's CIF is not taken.
    EsNif,
    /// `it_codice_fiscale`: the 16-character Italian personal fiscal code:
    /// its structure (6 letters, 2 digits, a month letter, 2 digits, a
    /// letter, 3 digits, the digits possibly replaced by their omocodia
    /// letters `LMNPQRSTUV`) and its check letter. The birth date is not
    /// checked; the 11-digit company number is not taken (`luhn` is).
    ItCodiceFiscale,
    /// `npi`: a US National Provider Identifier: exactly ten digits, Luhn
    /// over `80840` followed by the ten digits.
    Npi,
    /// `sg_nric`: a Singapore NRIC/FIN: `S`, `T`, `F`, `G` or `M`, 7 digits
    /// and the check letter of the prefix's table (weights 2,7,6,5,4,3,2;
    /// offset 4 for `T`/`G`, 3 for `M`).
    SgNric,
    /// `fr_nir`: a French NIR (social security number): 15 characters, the
    /// 13-character number (digits, the department in places 6–7 possibly
    /// `2A` or `2B`, read as 19 and 18) and its two-digit key, 97 − (the
    /// number mod 97). The birth month and department are not checked.
    FrNir,
    /// `kr_rrn`: a South Korean resident registration number: 13 digits, the
    /// last (11 − Σ wᵢ·dᵢ mod 11) mod 10 with weights 2–9, 2–5. The birth
    /// date and place of birth are not checked.
    KrRrn,
    /// `jp_my_number`: a Japanese individual number (My Number): 12 digits,
    /// the last (−Σ wᵢ·dᵢ mod 11) mod 10 with weights 6, 5, 4, 3, 2, 7, 6,
    /// 5, 4, 3, 2.
    JpMyNumber,
    /// `nl_btw`: a Dutch VAT number: an optional `NL`, 9 digits, `B` and 2
    /// digits (neither part all zeros); valid when the 9 digits pass the
    /// BSN 11-test (legal entities, sole traders before 2020) or when ISO
    /// 7064 MOD 97-10 of `NL`, the digits, `B` and the suffix is 1 (sole
    /// traders since 2020). Letters in either case.
    NlBtw,
    /// `in_gstin`: an Indian GSTIN: a state code `01`–`37`, a PAN (5
    /// letters, the fourth a holder type of `ABCFGHLJPTK`, 4 digits not
    /// `0000`, a letter), a registration count (not `0`), `Z`, and the
    /// check character of the Luhn mod 36 algorithm over `0`–`9`, `A`–`Z`.
    InGstin,
    /// `fr_tva`: a French VAT number: an optional `FR`, a two-character key
    /// (digits, or letters other than `I` and `O`) and the 9-digit SIREN,
    /// which must pass Luhn unless it begins `000` (Monaco). A numeric key
    /// is (SIREN·100 + 12) mod 97; a key with a letter follows the
    /// administration's alphanumeric formula (as python-stdnum's
    /// `fr.tva`). Letters in either case.
    FrTva,
    /// `es_cif`: a Spanish legal entity's CIF: an organisation letter of
    /// `ABCDEFGHJNPQRSUVW`, 7 digits and the control character, the Luhn
    /// check digit of the 7 digits or the letter `JABCDEFGHI`[that digit]
    /// (either is taken: which one an organisation type uses is not
    /// applied consistently). Letters in either case.
    EsCif,
    /// `at_uid`: an Austrian VAT number (UID): an optional `AT`, `U` and 8
    /// digits, the last (6 − the Luhn checksum of the 7 before it) mod 10
    /// (that checksum doubles every second digit from the right, the
    /// rightmost not), as python-stdnum's `at.uid`. Letters in either case.
    AtUid,
    /// `pt_nif`: a Portuguese tax number (NIF, also the VAT number after
    /// `PT`): an optional `PT` and 9 digits, the first not `0`, the last
    /// (11 − Σ wᵢ·dᵢ mod 11) mod 11 mod 10 with weights 9 down to 2.
    PtNif,
}

/// Every named validator, as the `checksum` key spells it.
pub const NAMES: &[&str] = &[
    "luhn",
    "verhoeff",
    "damm",
    "mod97",
    "iban",
    "iso7064_mod11_10",
    "iso7064_mod11_2",
    "es_nif",
    "it_codice_fiscale",
    "npi",
    "sg_nric",
    "fr_nir",
    "kr_rrn",
    "jp_my_number",
    "in_gstin",
    "nl_btw",
    "fr_tva",
    "es_cif",
    "at_uid",
    "pt_nif",
];

/// The list of known forms that every naming error ends with.
fn known() -> String {
    format!(
        "known: {}, or a mapping {{weights: [...], modulus: m, remainder: r}}",
        NAMES.join(", ")
    )
}

/// A user's string in an error, never more than 40 characters of it.
fn quoted(s: &str) -> String {
    if s.chars().count() <= 40 {
        format!("`{s}`")
    } else {
        format!("a {}-character string", s.chars().count())
    }
}

impl FromStr for Checksum {
    type Err = String;

    /// A validator by name (`luhn`, `iban`…); an unknown name is an error
    /// that lists the known ones.
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "luhn" => Checksum::Luhn,
            "verhoeff" => Checksum::Verhoeff,
            "damm" => Checksum::Damm,
            "mod97" => Checksum::Mod97,
            "iban" => Checksum::Iban,
            "iso7064_mod11_10" => Checksum::Iso7064Mod11_10,
            "iso7064_mod11_2" => Checksum::Iso7064Mod11_2,
            "es_nif" => Checksum::EsNif,
            "it_codice_fiscale" => Checksum::ItCodiceFiscale,
            "npi" => Checksum::Npi,
            "sg_nric" => Checksum::SgNric,
            "fr_nir" => Checksum::FrNir,
            "kr_rrn" => Checksum::KrRrn,
            "jp_my_number" => Checksum::JpMyNumber,
            "in_gstin" => Checksum::InGstin,
            "nl_btw" => Checksum::NlBtw,
            "fr_tva" => Checksum::FrTva,
            "es_cif" => Checksum::EsCif,
            "at_uid" => Checksum::AtUid,
            "pt_nif" => Checksum::PtNif,
            "weighted" => {
                return Err(
                    "`checksum`: the weighted validator is a mapping {weights: [...], modulus: m, remainder: r}, not a name"
                        .to_string(),
                )
            }
            _ => {
                return Err(format!(
                    "`checksum`: unknown validator {} ({})",
                    quoted(s),
                    known()
                ))
            }
        })
    }
}

impl fmt::Display for Checksum {
    /// The name as the `checksum` key spells it; the weighted form as its
    /// mapping in YAML flow style.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Checksum::Weighted {
                weights,
                modulus,
                remainder,
            } => {
                f.write_str("{weights: [")?;
                for (i, w) in weights.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{w}")?;
                }
                write!(f, "], modulus: {modulus}, remainder: {remainder}}}")
            }
            named => f.write_str(named.name().unwrap_or("weighted")),
        }
    }
}

/// The bounds of the weighted form's fields that are known: 1 to
/// [`MAX_WEIGHTS`] weights, modulus at least 2, remainder below the modulus.
fn weighted_bounds(
    weights: Option<&[u32]>,
    modulus: Option<u32>,
    remainder: Option<u32>,
    problems: &mut Vec<String>,
) {
    match weights {
        Some([]) => problems.push("`checksum.weights`: must not be empty".to_string()),
        Some(w) if w.len() > MAX_WEIGHTS => problems.push(format!(
            "`checksum.weights`: {} weights, at most {MAX_WEIGHTS}",
            w.len()
        )),
        _ => {}
    }
    match (modulus, remainder) {
        (Some(m), _) if m < 2 => {
            problems.push(format!("`checksum.modulus`: {m}, must be at least 2"))
        }
        (Some(m), Some(r)) if r >= m => problems.push(format!(
            "`checksum.remainder`: {r}, must be below the modulus ({m})"
        )),
        _ => {}
    }
}

/// One integer field of the weighted mapping as a `u32`.
fn field_u32(value: &serde_yaml::Value, field: &str) -> Result<u32, String> {
    value
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            format!(
                "`checksum.{field}`: must be an integer from 0 to {}",
                u32::MAX
            )
        })
}

impl Checksum {
    /// Parses the `checksum` key of a codon: a string names a validator
    /// (see [`NAMES`]), a mapping `{weights: [...], modulus: m, remainder: r}`
    /// is the weighted form. Errors are lowercase, name the field
    /// (`checksum`, `checksum.weights`…) and, for an unknown name, list the
    /// known ones. A caller prefixes the codon's place (`codons[3].`).
    pub fn from_yaml(value: &serde_yaml::Value) -> Result<Checksum, String> {
        match value {
            serde_yaml::Value::String(s) => s.parse(),
            serde_yaml::Value::Mapping(m) => {
                // Each field: `None` when absent, `Some(None)` when present
                // but wrong (its problem already recorded).
                let mut weights: Option<Option<Vec<u32>>> = None;
                let mut modulus: Option<Option<u32>> = None;
                let mut remainder: Option<Option<u32>> = None;
                let mut problems = Vec::new();
                for (k, v) in m {
                    match k.as_str() {
                        Some("weights") => {
                            let ws = v.as_sequence().and_then(|seq| {
                                seq.iter()
                                    .map(|w| field_u32(w, "weights").ok())
                                    .collect::<Option<Vec<u32>>>()
                            });
                            if ws.is_none() {
                                problems.push(format!(
                                    "`checksum.weights`: must be a list of integers from 0 to {}",
                                    u32::MAX
                                ));
                            }
                            weights = Some(ws);
                        }
                        Some("modulus") => {
                            modulus = Some(field_u32(v, "modulus").map_err(|e| problems.push(e)).ok());
                        }
                        Some("remainder") => {
                            remainder =
                                Some(field_u32(v, "remainder").map_err(|e| problems.push(e)).ok());
                        }
                        Some(other) => problems.push(format!(
                            "`checksum`: unknown key {} in the weighted form (keys: weights, modulus, remainder)",
                            quoted(other)
                        )),
                        None => problems.push(
                            "`checksum`: a key of the weighted form is not a string (keys: weights, modulus, remainder)"
                                .to_string(),
                        ),
                    }
                }
                for (name, absent) in [
                    ("weights", weights.is_none()),
                    ("modulus", modulus.is_none()),
                    ("remainder", remainder.is_none()),
                ] {
                    if absent {
                        problems.push(format!("`checksum.{name}`: missing in the weighted form"));
                    }
                }
                let (weights, modulus, remainder) =
                    (weights.flatten(), modulus.flatten(), remainder.flatten());
                weighted_bounds(weights.as_deref(), modulus, remainder, &mut problems);
                match (weights, modulus, remainder) {
                    (Some(weights), Some(modulus), Some(remainder)) if problems.is_empty() => {
                        Ok(Checksum::Weighted {
                            weights,
                            modulus,
                            remainder,
                        })
                    }
                    _ => Err(problems.join("; ")),
                }
            }
            _ => Err(format!(
                "`checksum`: must be a validator name or a weighted mapping ({})",
                known()
            )),
        }
    }

    /// The weighted form, its bounds checked: 1 to [`MAX_WEIGHTS`] weights,
    /// modulus at least 2, remainder below the modulus.
    pub fn weighted(weights: Vec<u32>, modulus: u32, remainder: u32) -> Result<Checksum, String> {
        let mut problems = Vec::new();
        weighted_bounds(
            Some(&weights),
            Some(modulus),
            Some(remainder),
            &mut problems,
        );
        if problems.is_empty() {
            Ok(Checksum::Weighted {
                weights,
                modulus,
                remainder,
            })
        } else {
            Err(problems.join("; "))
        }
    }

    /// The name the `checksum` key spells; `None` for the weighted form.
    pub fn name(&self) -> Option<&'static str> {
        Some(match self {
            Checksum::Luhn => "luhn",
            Checksum::Verhoeff => "verhoeff",
            Checksum::Damm => "damm",
            Checksum::Mod97 => "mod97",
            Checksum::Iban => "iban",
            Checksum::Iso7064Mod11_10 => "iso7064_mod11_10",
            Checksum::Iso7064Mod11_2 => "iso7064_mod11_2",
            Checksum::EsNif => "es_nif",
            Checksum::ItCodiceFiscale => "it_codice_fiscale",
            Checksum::Npi => "npi",
            Checksum::SgNric => "sg_nric",
            Checksum::FrNir => "fr_nir",
            Checksum::KrRrn => "kr_rrn",
            Checksum::JpMyNumber => "jp_my_number",
            Checksum::InGstin => "in_gstin",
            Checksum::NlBtw => "nl_btw",
            Checksum::FrTva => "fr_tva",
            Checksum::EsCif => "es_cif",
            Checksum::AtUid => "at_uid",
            Checksum::PtNif => "pt_nif",
            Checksum::Weighted { .. } => return None,
        })
    }

    /// Whether `value` passes: the validator runs on its compact form
    /// (spaces, `-`, `.` and `/` removed). A compact form that is empty,
    /// longer than [`MAX_COMPACT_LEN`] or holds a character the algorithm
    /// does not take fails. Never panics; allocates nothing.
    pub fn check(&self, value: &str) -> bool {
        let mut buf = [0u8; MAX_COMPACT_LEN];
        let Some(c) = compact(value, &mut buf) else {
            return false;
        };
        match self {
            Checksum::Luhn => c.len() >= 2 && luhn(c),
            Checksum::Verhoeff => c.len() >= 2 && verhoeff(c),
            Checksum::Damm => c.len() >= 2 && damm(c),
            Checksum::Mod97 => mod97_remainder(&[c]) == Some(1),
            Checksum::Iban => iban(c),
            Checksum::Iso7064Mod11_10 => iso7064_mod11_10(c),
            Checksum::Iso7064Mod11_2 => iso7064_mod11_2(c),
            Checksum::Weighted {
                weights,
                modulus,
                remainder,
            } => weighted(c, weights, *modulus, *remainder),
            Checksum::EsNif => es_nif(c),
            Checksum::ItCodiceFiscale => it_codice_fiscale(c),
            Checksum::Npi => c.len() == 10 && all_digits(c) && luhn_from(c, b"80840"),
            Checksum::SgNric => sg_nric(c),
            Checksum::FrNir => fr_nir(c),
            Checksum::KrRrn => kr_rrn(c),
            Checksum::JpMyNumber => jp_my_number(c),
            Checksum::InGstin => in_gstin(c),
            Checksum::NlBtw => nl_btw(c),
            Checksum::FrTva => fr_tva(c),
            Checksum::EsCif => es_cif(c),
            Checksum::AtUid => at_uid(c),
            Checksum::PtNif => pt_nif(c),
        }
    }
}

/// The compact form of `value`: spaces, `-`, `.` and `/` removed, copied
/// into `buf` only when it holds one (most values hold none). `None` if it
/// is empty, longer than [`MAX_COMPACT_LEN`] or holds a non-ASCII
/// character (no validator takes one).
fn compact<'b>(value: &'b str, buf: &'b mut [u8; MAX_COMPACT_LEN]) -> Option<&'b [u8]> {
    let bytes = value.as_bytes();
    if !bytes.is_ascii() {
        return None;
    }
    let c = if !has_separator(bytes) {
        bytes
    } else if bytes.len() <= MAX_COMPACT_LEN {
        // Every byte is written and only the kept ones counted: no branch
        // a byte. `n` stays below the byte's index, so below the length.
        let mut n = 0;
        for &b in bytes {
            buf[n & (MAX_COMPACT_LEN - 1)] = b;
            n += usize::from(KEPT[usize::from(b)]);
        }
        buf.get(..n)?
    } else {
        let mut n = 0;
        for &b in bytes.iter().filter(|&&b| !is_separator(b)) {
            *buf.get_mut(n)? = b;
            n += 1;
        }
        buf.get(..n)?
    };
    (!c.is_empty() && c.len() <= MAX_COMPACT_LEN).then_some(c)
}

/// What a compact form leaves out: a space, `-`, `.` or `/`.
fn is_separator(b: u8) -> bool {
    KEPT[usize::from(b)] == 0
}

/// Per byte, 1 if a compact form keeps it, 0 for a separator: the copy
/// adds it to its count, one read a byte (a test of the range and a shift
/// cost four instructions a byte, a third of a card number's check).
const KEPT: [u8; 256] = {
    let mut kept = [1u8; 256];
    kept[b' ' as usize] = 0;
    kept[b'-' as usize] = 0;
    kept[b'.' as usize] = 0;
    kept[b'/' as usize] = 0;
    kept
};

/// Whether `bytes` holds a separator, eight bytes at a time: every value
/// a checksum judges is read this way first, and one without separators
/// is used as it is.
fn has_separator(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = ONES << 7;
    // Whether a byte of `x` is 0 (exact: a borrow reaches a high bit only
    // past a byte that is 0).
    let zero_in = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS != 0;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut x = [0u8; 8];
        x.copy_from_slice(w);
        let x = u64::from_ne_bytes(x);
        let holds = |b: u8| zero_in(x ^ (ONES * u64::from(b)));
        if holds(b' ') | holds(b'-') | holds(b'.') | holds(b'/') {
            return true;
        }
    }
    words.remainder().iter().any(|&b| is_separator(b))
}

fn all_digits(c: &[u8]) -> bool {
    c.iter().all(u8::is_ascii_digit)
}

/// The value of a digit or letter (A–Z, either case, as 10–35).
fn alnum_value(b: u8) -> Option<u32> {
    match b {
        b'0'..=b'9' => Some(u32::from(b - b'0')),
        b'A'..=b'Z' => Some(u32::from(b - b'A') + 10),
        b'a'..=b'z' => Some(u32::from(b - b'a') + 10),
        _ => None,
    }
}

fn luhn(c: &[u8]) -> bool {
    luhn_from(c, b"")
}

/// Luhn over `prefix` followed by `c` (both digits only).
fn luhn_from(c: &[u8], prefix: &[u8]) -> bool {
    // The rightmost digit is not doubled; a prefix shifts nothing, as it
    // comes before `c`.
    let Some(sum) = luhn_add(0, c, false) else {
        return false;
    };
    let doubled = c.len() % 2 == 1;
    luhn_add(sum, prefix, doubled).is_some_and(|s| s.is_multiple_of(10))
}

/// `sum` plus Luhn's terms of `digits`, read from the right, the rightmost
/// doubled when `doubled`; `None` on a byte that is not a digit.
fn luhn_add(mut sum: u32, digits: &[u8], mut doubled: bool) -> Option<u32> {
    // 2·d with its digits added, by d.
    const TWICE: [u32; 10] = [0, 2, 4, 6, 8, 1, 3, 5, 7, 9];
    for &b in digits.iter().rev() {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        sum += if doubled {
            TWICE[usize::from(d)]
        } else {
            u32::from(d)
        };
        doubled = !doubled;
    }
    Some(sum)
}

const VERHOEFF_D: [[u8; 10]; 10] = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    [1, 2, 3, 4, 0, 6, 7, 8, 9, 5],
    [2, 3, 4, 0, 1, 7, 8, 9, 5, 6],
    [3, 4, 0, 1, 2, 8, 9, 5, 6, 7],
    [4, 0, 1, 2, 3, 9, 5, 6, 7, 8],
    [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
    [6, 5, 9, 8, 7, 1, 0, 4, 3, 2],
    [7, 6, 5, 9, 8, 2, 1, 0, 4, 3],
    [8, 7, 6, 5, 9, 3, 2, 1, 0, 4],
    [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
];

const VERHOEFF_P: [[u8; 10]; 8] = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    [1, 5, 7, 6, 2, 8, 3, 0, 9, 4],
    [5, 8, 0, 3, 7, 9, 6, 1, 4, 2],
    [8, 9, 1, 6, 0, 4, 3, 5, 2, 7],
    [9, 4, 5, 3, 1, 2, 6, 8, 7, 0],
    [4, 2, 8, 6, 5, 7, 3, 9, 0, 1],
    [2, 7, 9, 3, 8, 0, 6, 4, 1, 5],
    [7, 0, 4, 6, 9, 1, 3, 2, 5, 8],
];

fn verhoeff(c: &[u8]) -> bool {
    let mut check = 0u8;
    for (i, &b) in c.iter().rev().enumerate() {
        if !b.is_ascii_digit() {
            return false;
        }
        let p = VERHOEFF_P[i % 8][usize::from(b - b'0')];
        check = VERHOEFF_D[usize::from(check)][usize::from(p)];
    }
    check == 0
}

const DAMM: [[u8; 10]; 10] = [
    [0, 3, 1, 7, 5, 9, 8, 6, 4, 2],
    [7, 0, 9, 2, 1, 5, 4, 8, 6, 3],
    [4, 2, 0, 6, 8, 7, 1, 3, 5, 9],
    [1, 7, 5, 0, 9, 8, 3, 4, 2, 6],
    [6, 1, 2, 3, 0, 4, 5, 9, 7, 8],
    [3, 6, 7, 4, 2, 0, 9, 5, 8, 1],
    [5, 8, 6, 9, 7, 2, 0, 1, 3, 4],
    [8, 9, 4, 5, 3, 6, 2, 0, 1, 7],
    [9, 4, 3, 8, 6, 1, 7, 2, 0, 5],
    [2, 5, 8, 1, 4, 3, 6, 7, 9, 0],
];

fn damm(c: &[u8]) -> bool {
    let mut interim = 0u8;
    for &b in c {
        if !b.is_ascii_digit() {
            return false;
        }
        interim = DAMM[usize::from(interim)][usize::from(b - b'0')];
    }
    interim == 0
}

/// ISO 7064 MOD 97-10 remainder of the digits and letters of `parts`,
/// read one after the other (a letter counts as its two-digit value);
/// `None` if one is neither or there are none.
fn mod97_remainder(parts: &[&[u8]]) -> Option<u32> {
    // Reduced only when it could overflow on the next character (×100
    // + 35): a division by 97 every eight letters or fifteen digits or so,
    // not one a character.
    const REDUCE_AT: u64 = 1 << 56;
    let mut r = 0u64;
    let mut any = false;
    // A part at a time, and a character's scale and value read from one
    // table: a value's check ran 22 instructions a character through a
    // flattened iterator and `alnum_value`'s branches.
    for part in parts {
        for &b in *part {
            let (scale, v) = MOD97_STEP[usize::from(b)];
            if scale == 0 {
                return None;
            }
            r = r * u64::from(scale) + u64::from(v);
            if r >= REDUCE_AT {
                r %= 97;
            }
        }
        any |= !part.is_empty();
    }
    // Below 97 once reduced.
    any.then_some((r % 97) as u32)
}

/// Per byte, what reading it does to a MOD 97-10 number: a digit shifts it
/// one decimal place, a letter (its two-digit value, either case) two; 0
/// for any other byte, which the algorithm does not take.
const MOD97_STEP: [(u8, u8); 256] = {
    let mut t = [(0u8, 0u8); 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = match c {
            b'0'..=b'9' => (10, c - b'0'),
            b'A'..=b'Z' => (100, c - b'A' + 10),
            b'a'..=b'z' => (100, c - b'a' + 10),
            _ => (0, 0),
        };
        b += 1;
    }
    t
};

fn iban(c: &[u8]) -> bool {
    let [a, b, d1, d2, bban @ ..] = c else {
        return false;
    };
    if !d1.is_ascii_digit() || !d2.is_ascii_digit() {
        return false;
    }
    let country = [a.to_ascii_uppercase(), b.to_ascii_uppercase()];
    let Ok(i) = iban_registry::BBAN_LENGTHS.binary_search_by(|(cc, _)| cc.cmp(&country)) else {
        return false;
    };
    let Some(&(_, len)) = iban_registry::BBAN_LENGTHS.get(i) else {
        return false;
    };
    bban.len() == usize::from(len) && mod97_remainder(&[bban, &[*a, *b, *d1, *d2]]) == Some(1)
}

fn iso7064_mod11_10(c: &[u8]) -> bool {
    let mut check = 5u32;
    for &b in c {
        if !b.is_ascii_digit() {
            return false;
        }
        let carried = if check == 0 { 10 } else { check };
        check = ((carried * 2) % 11 + u32::from(b - b'0')) % 10;
    }
    check == 1
}

fn iso7064_mod11_2(c: &[u8]) -> bool {
    let mut check = 0u32;
    let last = c.len().saturating_sub(1);
    for (i, &b) in c.iter().enumerate() {
        let v = match b {
            b'0'..=b'9' => u32::from(b - b'0'),
            b'X' if i == last => 10,
            _ => return false,
        };
        check = (check * 2 + v) % 11;
    }
    check == 1
}

fn weighted(c: &[u8], weights: &[u32], modulus: u32, remainder: u32) -> bool {
    if modulus < 2 || remainder >= modulus || weights.is_empty() || c.len() != weights.len() {
        return false;
    }
    // At most 64 weights below 2³² times a digit: the sum fits in a u64,
    // so it is reduced once (a division by a modulus known only at run
    // time costs tens of cycles; one per digit doubled the check's cost).
    let mut sum = 0u64;
    for (&b, &w) in c.iter().zip(weights) {
        if !b.is_ascii_digit() {
            return false;
        }
        sum += u64::from(w) * u64::from(b - b'0');
    }
    sum % u64::from(modulus) == u64::from(remainder)
}

/// The check letters of the Spanish DNI, by the number mod 23.
const DNI_LETTERS: &[u8; 23] = b"TRWAGMYFPDXBNJZSQVHLCKE";

fn es_nif(c: &[u8]) -> bool {
    let [first, body @ .., letter] = c else {
        return false;
    };
    if c.len() != 9 || !all_digits(body) {
        return false;
    }
    let lead = match first.to_ascii_uppercase() {
        d @ b'0'..=b'9' => u32::from(d - b'0'),
        b'X' => 0,
        b'Y' => 1,
        b'Z' => 2,
        // K, L, M: the DNI letter of the seven digits alone.
        b'K' | b'L' | b'M' => 0,
        _ => return false,
    };
    let n = body.iter().fold(lead, |n, &d| n * 10 + u32::from(d - b'0'));
    DNI_LETTERS.get(n as usize % 23) == Some(&letter.to_ascii_uppercase())
}

/// What each place of a codice fiscale takes: `L` a letter, `D` a digit or
/// its omocodia letter, `M` a month letter, `C` the check letter.
const CF_SHAPE: &[u8; 16] = b"LLLLLLDDMDDLDDDC";
const CF_OMOCODIA: &[u8; 10] = b"LMNPQRSTUV";
const CF_MONTHS: &[u8; 12] = b"ABCDEHLMPRST";
/// The value of a character in an odd (1st, 3rd…) place, by digit or
/// letter index; even places count a digit as itself and a letter as its
/// index.
const CF_ODD: [u32; 26] = [
    1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14, 16, 10, 22, 25, 24, 23,
];

fn it_codice_fiscale(c: &[u8]) -> bool {
    if c.len() != 16 {
        return false;
    }
    let mut sum = 0u32;
    for (i, (&raw, &shape)) in c.iter().zip(CF_SHAPE).enumerate() {
        let b = raw.to_ascii_uppercase();
        let ok = match shape {
            b'L' | b'C' => b.is_ascii_uppercase(),
            b'D' => b.is_ascii_digit() || CF_OMOCODIA.contains(&b),
            _ => CF_MONTHS.contains(&b),
        };
        if !ok {
            return false;
        }
        if shape == b'C' {
            return u32::from(b - b'A') == sum % 26;
        }
        let index = if b.is_ascii_digit() {
            b - b'0'
        } else {
            b - b'A'
        };
        sum += if i % 2 == 0 {
            CF_ODD.get(usize::from(index)).copied().unwrap_or(0)
        } else {
            u32::from(index)
        };
    }
    false
}

fn sg_nric(c: &[u8]) -> bool {
    const WEIGHTS: [u32; 7] = [2, 7, 6, 5, 4, 3, 2];
    let [prefix, digits @ .., letter] = c else {
        return false;
    };
    if c.len() != 9 || !all_digits(digits) {
        return false;
    }
    // The check letter by the weighted sum (with the prefix's offset) mod 11.
    let (offset, table): (u32, &[u8; 11]) = match prefix.to_ascii_uppercase() {
        b'S' => (0, b"JZIHGFEDCBA"),
        b'T' => (4, b"JZIHGFEDCBA"),
        b'F' => (0, b"XWUTRQPNMLK"),
        b'G' => (4, b"XWUTRQPNMLK"),
        b'M' => (3, b"XWUTRQPNJLK"),
        _ => return false,
    };
    let sum = digits
        .iter()
        .zip(WEIGHTS)
        .fold(offset, |s, (&d, w)| s + w * u32::from(d - b'0'));
    table.get(sum as usize % 11) == Some(&letter.to_ascii_uppercase())
}

fn nl_btw(c: &[u8]) -> bool {
    let body = without_country(c, b"NL");
    let [digits @ .., b, s1, s2] = body else {
        return false;
    };
    let suffix = [*s1, *s2];
    if digits.len() != 9
        || !all_digits(digits)
        || !all_digits(&suffix)
        || !b.eq_ignore_ascii_case(&b'B')
        || digits.iter().all(|&d| d == b'0')
        || suffix == *b"00"
    {
        return false;
    }
    // The BSN 11-test: weights 9 down to 2, then −1.
    let sum = digits
        .iter()
        .zip([9i32, 8, 7, 6, 5, 4, 3, 2, -1])
        .fold(0i32, |s, (&d, w)| s + w * i32::from(d - b'0'));
    sum.rem_euclid(11) == 0 || mod97_remainder(&[b"NL", body]) == Some(1)
}

fn fr_nir(c: &[u8]) -> bool {
    if c.len() != 15 {
        return false;
    }
    let mut number = 0u64;
    let mut key = 0u64;
    for (i, &raw) in c.iter().enumerate() {
        let b = raw.to_ascii_uppercase();
        let corsica = i == 5 && c.get(6).is_some_and(u8::is_ascii_alphabetic);
        let d = match b {
            b'0'..=b'9' if !corsica => u64::from(b - b'0'),
            // Corsica: 2A reads as 19, 2B as 18.
            b'2' if corsica => 1,
            b'A' if i == 6 && c.get(5) == Some(&b'2') => 9,
            b'B' if i == 6 && c.get(5) == Some(&b'2') => 8,
            _ => return false,
        };
        if i < 13 {
            number = number * 10 + d;
        } else {
            key = key * 10 + d;
        }
    }
    key == 97 - number % 97
}

/// The check digit (the last) of `c`, all digits, by `weights` over the
/// digits before it: `f(Σ wᵢ·dᵢ mod 11)`.
fn mod11_check_digit(c: &[u8], weights: &[u32], f: impl Fn(u32) -> u32) -> bool {
    let [body @ .., last] = c else {
        return false;
    };
    if body.len() != weights.len() || !all_digits(c) {
        return false;
    }
    let sum: u32 = body
        .iter()
        .zip(weights)
        .map(|(&d, w)| w * u32::from(d - b'0'))
        .sum();
    f(sum % 11) == u32::from(last - b'0')
}

/// The Luhn check digit of `digits` (ASCII digits): the one that, put
/// after them, makes the whole pass.
fn luhn_check_digit(digits: &[u8]) -> u32 {
    (10 - luhn_sum(digits, true) % 10) % 10
}

/// Luhn's sum over `digits` (ASCII digits), doubling every second digit
/// from the right, the rightmost included when `rightmost_doubled`.
fn luhn_sum(digits: &[u8], rightmost_doubled: bool) -> u32 {
    // The callers pass digits only.
    luhn_add(0, digits, rightmost_doubled).unwrap_or(0)
}

fn fr_tva(c: &[u8]) -> bool {
    const KEY_ALPHABET: &[u8] = b"0123456789ABCDEFGHJKLMNPQRSTUVWXYZ";
    let mut u = [0u8; 13];
    if c.len() > u.len() {
        return false;
    }
    for (to, &from) in u.iter_mut().zip(c) {
        *to = from.to_ascii_uppercase();
    }
    let u = &u[..c.len()];
    let v = u.strip_prefix(b"FR").unwrap_or(u);
    let [k0, k1, siren @ ..] = v else {
        return false;
    };
    if siren.len() != 9 || !all_digits(siren) {
        return false;
    }
    let index = |b: &u8| KEY_ALPHABET.iter().position(|a| a == b);
    let (Some(i0), Some(i1)) = (index(k0), index(k1)) else {
        return false;
    };
    if &siren[..3] != b"000" && !luhn(siren) {
        return false;
    }
    let n = siren
        .iter()
        .fold(0u64, |n, &b| n * 10 + u64::from(b - b'0'));
    let (i0, i1) = (i0 as u64, i1 as u64);
    if i0 < 10 && i1 < 10 {
        return i0 * 10 + i1 == (n * 100 + 12) % 97;
    }
    // Neither sum can go below zero: a letter's index is at least 10.
    let check = if i0 < 10 {
        i0 * 24 + i1 - 10
    } else {
        i0 * 34 + i1 - 100
    };
    (n + 1 + check / 11) % 11 == check % 11
}

fn es_cif(c: &[u8]) -> bool {
    let [first, digits @ .., control] = c else {
        return false;
    };
    if c.len() != 9
        || !b"ABCDEFGHJNPQRSUVW".contains(&first.to_ascii_uppercase())
        || !all_digits(digits)
    {
        return false;
    }
    let d = luhn_check_digit(digits);
    let control = control.to_ascii_uppercase();
    u32::from(control) == u32::from(b'0') + d || b"JABCDEFGHI".get(d as usize) == Some(&control)
}

fn kr_rrn(c: &[u8]) -> bool {
    mod11_check_digit(c, &[2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5], |r| (11 - r) % 10)
}

fn jp_my_number(c: &[u8]) -> bool {
    mod11_check_digit(c, &[6, 5, 4, 3, 2, 7, 6, 5, 4, 3, 2], |r| {
        (11 - r) % 11 % 10
    })
}

/// `c` without a leading two-letter country code `cc` (either case).
fn without_country<'c>(c: &'c [u8], cc: &[u8; 2]) -> &'c [u8] {
    match c {
        [a, b, rest @ ..] if a.eq_ignore_ascii_case(&cc[0]) && b.eq_ignore_ascii_case(&cc[1]) => {
            rest
        }
        _ => c,
    }
}

fn at_uid(c: &[u8]) -> bool {
    let [u, digits @ .., last] = without_country(c, b"AT") else {
        return false;
    };
    if !u.eq_ignore_ascii_case(&b'U') || digits.len() != 7 || !all_digits(digits) {
        return false;
    }
    // The Luhn checksum of the 7 digits: the rightmost is not doubled.
    let sum = luhn_sum(digits, false);
    last.is_ascii_digit() && (16 - sum % 10) % 10 == u32::from(last - b'0')
}

fn pt_nif(c: &[u8]) -> bool {
    let c = without_country(c, b"PT");
    c.first().is_some_and(|&b| b != b'0')
        && mod11_check_digit(c, &[9, 8, 7, 6, 5, 4, 3, 2], |r| (11 - r) % 11 % 10)
}

fn in_gstin(c: &[u8]) -> bool {
    let mut u = [0u8; 15];
    if c.len() != 15 {
        return false;
    }
    for (to, &from) in u.iter_mut().zip(c) {
        *to = from.to_ascii_uppercase();
    }
    let [s1, s2, p @ .., count, z, _check] = u;
    let state = match (s1, s2) {
        (b'0'..=b'9', b'0'..=b'9') => (s1 - b'0') * 10 + (s2 - b'0'),
        _ => return false,
    };
    // The PAN: 5 letters (the fourth a holder type), 4 digits not 0000, a letter.
    let pan_ok = p.iter().enumerate().all(|(i, &b)| match i {
        0..=4 => b.is_ascii_uppercase(),
        5..=8 => b.is_ascii_digit(),
        _ => b.is_ascii_uppercase(),
    }) && b"ABCFGHLJPTK".contains(&p[3])
        && &p[5..9] != b"0000";
    if !(1..=37).contains(&state)
        || !pan_ok
        || count == b'0'
        || !count.is_ascii_alphanumeric()
        || z != b'Z'
    {
        return false;
    }
    // Luhn mod 36 over the alphabet 0-9A-Z, the check character included.
    let mut sum = 0u32;
    for (i, &b) in u.iter().rev().enumerate() {
        let Some(v) = alnum_value(b) else {
            return false;
        };
        sum += if i % 2 == 1 {
            (v * 2) / 36 + (v * 2) % 36
        } else {
            v
        };
    }
    sum.is_multiple_of(36)
}
