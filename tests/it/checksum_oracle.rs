//! The python-stdnum oracle of the [§16.2](docs/codons.md#s16-2) validators (issue 22):
//! `tests/checksum/cases.json`, written by `scripts/checksum-oracle.sh`,
//! lists for every validator stdnum implements generated valid values and
//! their one-digit near misses with stdnum's verdict (`cases`), and the
//! values on which SPEC deliberately differs from stdnum with SPEC's verdict
//! (`differences`). `Checksum::check` must give that verdict on every one;
//! all disagreements are listed at once. The curated packs' expressions
//! of other identifiers with these validators (`packs/*.yaml`: NL BSN, AU
//! TFN and Medicare, PL NIP, DE tax id and VAT, IT VAT, Aadhaar) are checked
//! the same way against the identifier's stdnum module.

use helixor::checksum::{Checksum, NAMES};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

fn oracle() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/checksum/cases.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The `checksum` of a validator entry, through the playbook parser (JSON
/// is YAML).
fn checksum_of(entry: &Value) -> Checksum {
    let yaml: serde_yaml::Value = serde_yaml::to_value(&entry["checksum"]).unwrap();
    Checksum::from_yaml(&yaml).unwrap()
}

#[test]
fn every_case_agrees_with_the_oracle() {
    let doc = oracle();
    let validators = doc["validators"].as_array().unwrap();
    let mut wrong = Vec::new();
    let mut total = 0;
    let mut named = BTreeSet::new();
    let mut weighted = 0;
    for entry in validators {
        let checksum = checksum_of(entry);
        match checksum.name() {
            Some(n) => {
                named.insert(n);
            }
            None => weighted += 1,
        }
        let oracle = entry["oracle"].as_str().unwrap();
        let cases = entry["cases"].as_array().unwrap();
        let (mut valid, mut invalid) = (0, 0);
        for case in cases {
            let value = case[0].as_str().unwrap();
            let verdict = case[1].as_bool().unwrap();
            if verdict {
                valid += 1;
            } else {
                invalid += 1;
            }
            total += 1;
            if checksum.check(value) != verdict {
                wrong.push(format!(
                    "{checksum} ({oracle}): {value:?} should {}",
                    if verdict { "pass" } else { "fail" }
                ));
            }
        }
        // Generated values and their near misses: both kinds, many of each.
        assert!(
            valid >= 100 && invalid >= 100,
            "{checksum}: {valid} valid, {invalid} invalid cases"
        );
        for d in entry["differences"].as_array().unwrap() {
            let value = d["value"].as_str().unwrap();
            let spec = d["spec"].as_bool().unwrap();
            assert_ne!(d["stdnum"].as_bool().unwrap(), spec, "{value}");
            assert!(!d["why"].as_str().unwrap().is_empty(), "{value}");
            total += 1;
            if checksum.check(value) != spec {
                wrong.push(format!(
                    "{checksum} (SPEC differs from {oracle}: {}): {value:?} should {}",
                    d["why"].as_str().unwrap(),
                    if spec { "pass" } else { "fail" }
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {total} cases disagree with the oracle:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // Every named validator stdnum implements, SPEC's three weighted
    // examples and the curated packs' weighted expressions (NL BSN, AU TFN,
    // AU Medicare, PL NIP, BE, LU, DK and FI VAT numbers); only sg_nric (not in stdnum) is tested by
    // published examples alone (src/checksum/tests.rs).
    let missing: Vec<_> = NAMES
        .iter()
        .filter(|n| !named.contains(*n) && **n != "sg_nric")
        .collect();
    assert!(missing.is_empty(), "no oracle cases for {missing:?}");
    assert_eq!(weighted, 11);
    // The packs' expressions with named validators, each against the
    // identifier's own stdnum module.
    let oracles: BTreeSet<&str> = validators
        .iter()
        .filter_map(|v| v["oracle"].as_str())
        .collect();
    for wanted in [
        "stdnum.nl.bsn",
        "stdnum.au.tfn",
        "stdnum.pl.nip",
        "stdnum.de.idnr",
        "stdnum.in_.aadhaar",
        "stdnum.fr.nir",
        "stdnum.kr.rrn",
        "stdnum.jp.in_",
        "stdnum.in_.gstin",
        "stdnum.at.uid",
        "stdnum.pt.nif",
        "stdnum.se.vat (the 10 digits before its 01)",
    ] {
        assert!(oracles.contains(wanted), "no oracle cases from {wanted}");
    }
    assert!(total > 5000, "{total}");
}
