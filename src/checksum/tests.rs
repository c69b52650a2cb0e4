use super::*;
use proptest::prelude::*;

fn named(name: &str) -> Checksum {
    name.parse().unwrap()
}

fn yaml(text: &str) -> Result<Checksum, String> {
    Checksum::from_yaml(&serde_yaml::from_str(text).unwrap())
}

fn aba() -> Checksum {
    Checksum::weighted(vec![3, 7, 1, 3, 7, 1, 3, 7, 1], 10, 0).unwrap()
}

fn nhs() -> Checksum {
    Checksum::weighted(vec![10, 9, 8, 7, 6, 5, 4, 3, 2, 1], 11, 0).unwrap()
}

fn pesel() -> Checksum {
    Checksum::weighted(vec![1, 3, 7, 9, 1, 3, 7, 9, 1, 3, 1], 10, 0).unwrap()
}

/// `(checksum, valid examples, invalid examples)`, published: Wikipedia's and
/// python-stdnum's documentation examples, CMS's NPI example, the SG NRIC
/// examples of ICA's published algorithm and GovTech FormSG's M-series test;
/// python-stdnum's doctests for FR NIR, KR RRN, JP My Number and GSTIN.
fn examples() -> Vec<(Checksum, Vec<&'static str>, Vec<&'static str>)> {
    vec![
        (
            Checksum::Luhn,
            vec!["79927398713", "4111 1111 1111 1111", "78949", "00", "18"],
            vec![
                "79927398710",
                "7894",
                "0",
                "4111-1111-1111-1112",
                "7992739871a",
            ],
        ),
        (
            Checksum::Verhoeff,
            vec!["2363", "12340", "1428570"],
            vec!["2364", "1234", "0", "236x"],
        ),
        (
            Checksum::Damm,
            vec!["5724", "00"],
            vec!["5727", "572", "0", "57 2a"],
        ),
        (
            Checksum::Mod97,
            vec![
                "9999123456789012141490",
                "08686001256515001121751",
                "WEST12345698765432GB82",
                "west12345698765432gb82",
            ],
            vec!["9999123456789012141491", "", "99991234567890121414_90"],
        ),
        (
            Checksum::Iban,
            vec![
                "GR16 0110 1050 0000 1054 7023 795",
                "BE31435411161155",
                "DE89 3704 0044 0532 0130 00",
                "GB82 WEST 1234 5698 7654 32",
                "gb82west12345698765432",
                "NL91ABNA0417164300",
            ],
            vec![
                "GB82 WEST 1234 5698 7654 33",
                "DE89 3704 0044 0532 0130 0",
                "DE89 3704 0044 0532 0130 000",
                "XX89370400440532013000",
                "DEAB370400440532013000",
                "DE89",
                "",
            ],
        ),
        (
            Checksum::Iso7064Mod11_10,
            vec!["794623", "002006673085"],
            vec!["794624", "002006673086", "79462a"],
        ),
        (
            Checksum::Iso7064Mod11_2,
            vec!["07940", "079X", "0000-0002-1825-0097"],
            vec!["07941", "079x", "0000-0002-1825-0098", "X"],
        ),
        (
            aba(),
            vec!["111000025", "021000021"],
            vec!["112000025", "11100002", "1110000250", "11100002B"],
        ),
        (
            nhs(),
            vec!["943 476 5870", "943-476-5870"],
            vec!["9434765871", "943476587"],
        ),
        (
            pesel(),
            vec!["44051401359", "02211307589"],
            vec!["44051401358", "4405140135"],
        ),
        (
            Checksum::EsNif,
            vec![
                "54362315K",
                "54362315-K",
                "X-5253868-R",
                "x-2482300w",
                "M-1234567-L",
            ],
            vec![
                "54362315Z",
                "X2482300A",
                "54362315",
                "B64717838",
                "W2482300W",
            ],
        ),
        (
            Checksum::ItCodiceFiscale,
            vec!["RCCMNL83S18D969H", "rccmnl83s18d969h", "CNTCHR83T41D969D"],
            vec![
                "RCCMNL83S18D969A",
                "RCCMNL83S18D969",
                "00743110157",
                "RCCMNL83Z18D969H",
                "RCCMNL83S18D9691",
            ],
        ),
        (
            Checksum::Npi,
            vec!["1234567893", "1234-567-893"],
            vec!["1234567890", "123456789", "12345678930", "808401234567893"],
        ),
        (
            Checksum::SgNric,
            vec![
                "S1234567D",
                "T1234567J",
                "F1234567N",
                "G1234567X",
                "M1234567K",
                "M3960741N",
                "s1234567d",
            ],
            vec![
                "S1234567A",
                "T1234567D",
                "F1234567X",
                "G1234567N",
                "M1234567N",
                "M1234567X",
                "A1234567D",
                "S123456D",
            ],
        ),
        (
            Checksum::FrNir,
            vec![
                "2 95 10 99 126 111 93",
                "253072B07300470",
                "253072A07300443",
                "253072a07300443",
            ],
            vec![
                "295109912611199",
                "253072C07300443",
                "253072A07300470",
                "6546546546546703",
                "2951099126111",
                "2530A2B07300470",
            ],
        ),
        (
            Checksum::KrRrn,
            vec!["971013-9019902"],
            vec!["971013-9019903", "971013-901990", "97101A-9019902"],
        ),
        (
            Checksum::JpMyNumber,
            vec!["6214 9832 0257"],
            vec!["6214 9832 0258", "6214 9832 025X", "6214 9832 02570"],
        ),
        (
            Checksum::InGstin,
            vec!["27AAPFU0939F1ZV", "27aapfu0939f1zv", "27-AAPFU0939F-1ZV"],
            vec![
                "27AAPFU0939F1Z",
                "369296450896540",
                "27AAPFU0939F1AA",
                "27AAPFU0939F1ZO",
                "27AAPFU0939F1ZW",
                "38AAPFU0939F1ZV",
                "27AAPEU0939F1ZV",
                "27AAPFU0939F0ZV",
            ],
        ),
        (
            Checksum::NlBtw,
            // A BSN-based number, the same without `NL`, and a sole
            // trader's 2020 number (MOD 97-10) with a space.
            vec![
                "NL004495445B01",
                "004495445B01",
                "nl004495445b01",
                "NL 478878384B72",
            ],
            vec![
                "NL004495446B01",
                "NL478878384B73",
                "NL004495445B00",
                "NL000000000B01",
                "NL004495445C01",
                "NL04495445B01",
                "DE004495445B01",
            ],
        ),
        (
            Checksum::AtUid,
            // python-stdnum's examples, with and without `AT`.
            vec!["ATU13585627", "AT U13585627", "U13585627", "atu13585627"],
            vec![
                "U13585626",
                "U1358562",
                "U135856270",
                "13585627",
                "ATX13585627",
            ],
        ),
        (
            Checksum::PtNif,
            vec!["PT 501 964 843", "501964843", "pt501964843"],
            vec!["PT 501 964 842", "001964843", "50196484", "5019648430"],
        ),
    ]
}

#[test]
fn published_examples() {
    let mut wrong = Vec::new();
    for (checksum, valid, invalid) in examples() {
        for v in valid {
            if !checksum.check(v) {
                wrong.push(format!("{checksum}: {v:?} should pass"));
            }
        }
        for v in invalid {
            if checksum.check(v) {
                wrong.push(format!("{checksum}: {v:?} should fail"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn compact_form_rules() {
    // Separators anywhere, any number of them.
    assert!(Checksum::Luhn.check(" 7-9.9/27398713 "));
    assert!(Checksum::Luhn.check("--79927398713//"));
    // Other characters are not separators.
    assert!(!Checksum::Luhn.check("79927398713\t"));
    assert!(!Checksum::Luhn.check("79927398713_"));
    assert!(!Checksum::Luhn.check("7992739871\u{00a0}3"));
    assert!(!Checksum::Luhn.check("٧٩٩٢٧٣٩٨٧١٣"));
    // Only separators: an empty compact form.
    assert!(!Checksum::Mod97.check(" - ./"));
    // 64 characters is the cap, with separators around them.
    let ok64 = format!("{}{}", "0".repeat(63), "0");
    assert!(Checksum::Luhn.check(&ok64));
    assert!(Checksum::Luhn.check(&format!(" {} ", ok64)));
    assert!(!Checksum::Luhn.check(&"0".repeat(65)));
}

#[test]
fn names_round_trip() {
    for &name in NAMES {
        let c = named(name);
        assert_eq!(c.name(), Some(name));
        assert_eq!(c.to_string(), name);
        assert_eq!(yaml(name).unwrap(), c);
    }
    assert_eq!(aba().name(), None);
    assert_eq!(
        aba().to_string(),
        "{weights: [3, 7, 1, 3, 7, 1, 3, 7, 1], modulus: 10, remainder: 0}"
    );
    assert_eq!(yaml(&aba().to_string()).unwrap(), aba());
}

#[test]
fn weighted_from_yaml() {
    assert_eq!(
        yaml("{weights: [10, 9, 8, 7, 6, 5, 4, 3, 2, 1], modulus: 11, remainder: 0}").unwrap(),
        nhs()
    );
    assert_eq!(
        yaml("weights: [1, 2]\nmodulus: 7\nremainder: 6\n").unwrap(),
        Checksum::Weighted {
            weights: vec![1, 2],
            modulus: 7,
            remainder: 6
        }
    );
}

#[test]
fn parse_errors_are_specific() {
    let all_names = NAMES.join(", ");
    let e = yaml("lunh").unwrap_err();
    assert!(e.starts_with("`checksum`: unknown validator `lunh`"), "{e}");
    assert!(e.contains(&all_names), "{e}");
    let e = yaml("Luhn").unwrap_err();
    assert!(e.contains("unknown validator `Luhn`"), "{e}");
    let e = yaml(&"x".repeat(500)).unwrap_err();
    assert!(e.contains("a 500-character string"), "{e}");
    let e = yaml("weighted").unwrap_err();
    assert!(e.contains("is a mapping"), "{e}");
    for (text, wanted) in [
        ("42", "must be a validator name or a weighted mapping"),
        ("[luhn]", "must be a validator name or a weighted mapping"),
        ("~", "must be a validator name or a weighted mapping"),
        ("{modulus: 10, remainder: 0}", "`checksum.weights`: missing"),
        (
            "{weights: [1], remainder: 0}",
            "`checksum.modulus`: missing",
        ),
        (
            "{weights: [1], modulus: 10}",
            "`checksum.remainder`: missing",
        ),
        (
            "{weights: [], modulus: 10, remainder: 0}",
            "`checksum.weights`: must not be empty",
        ),
        (
            "{weights: [1, -2], modulus: 10, remainder: 0}",
            "`checksum.weights`: must be a list of integers",
        ),
        (
            "{weights: 3, modulus: 10, remainder: 0}",
            "`checksum.weights`: must be a list of integers",
        ),
        (
            "{weights: [1.5], modulus: 10, remainder: 0}",
            "`checksum.weights`: must be a list of integers",
        ),
        (
            "{weights: [4294967296], modulus: 10, remainder: 0}",
            "`checksum.weights`: must be a list of integers",
        ),
        (
            "{weights: [1], modulus: 1, remainder: 0}",
            "`checksum.modulus`: 1, must be at least 2",
        ),
        (
            "{weights: [1], modulus: 0, remainder: 0}",
            "`checksum.modulus`: 0, must be at least 2",
        ),
        (
            "{weights: [1], modulus: ten, remainder: 0}",
            "`checksum.modulus`: must be an integer",
        ),
        (
            "{weights: [1], modulus: 10, remainder: 10}",
            "`checksum.remainder`: 10, must be below the modulus (10)",
        ),
        (
            "{weights: [1], modulus: 10, remainder: -1}",
            "`checksum.remainder`: must be an integer",
        ),
        (
            "{weights: [1], modulus: 10, remainder: 0, modulo: 3}",
            "`checksum`: unknown key `modulo` in the weighted form",
        ),
        (
            "{weights: [1], modulus: 10, remainder: 0, 7: 3}",
            "`checksum`: a key of the weighted form is not a string",
        ),
    ] {
        let e = yaml(text).unwrap_err();
        assert!(e.contains(wanted), "{text}: {e}");
        assert_eq!(e, e.to_lowercase(), "{text}: {e}");
        assert!(e.contains("`checksum"), "{text}: {e}");
    }
    let too_many = format!(
        "{{weights: [{}], modulus: 10, remainder: 0}}",
        vec!["1"; 65].join(", ")
    );
    let e = yaml(&too_many).unwrap_err();
    assert!(e.contains("65 weights, at most 64"), "{e}");
    let sixty_four = format!(
        "{{weights: [{}], modulus: 10, remainder: 0}}",
        vec!["1"; 64].join(", ")
    );
    assert!(yaml(&sixty_four).is_ok());
    // Every problem at once.
    let e = yaml("{weights: [], modulus: 1, remainder: 0, extra: 1}").unwrap_err();
    assert!(
        e.contains("unknown key `extra`")
            && e.contains("must not be empty")
            && e.contains("must be at least 2"),
        "{e}"
    );
    let e = yaml("{weights: x, modulus: y}").unwrap_err();
    assert!(
        e.contains("checksum.weights")
            && e.contains("checksum.modulus")
            && e.contains("checksum.remainder"),
        "{e}"
    );
}

#[test]
fn weighted_built_by_hand_out_of_bounds_passes_nothing() {
    for (weights, modulus, remainder) in [
        (vec![1u32], 0u32, 0u32),
        (vec![1], 1, 0),
        (vec![1], 10, 10),
        (vec![], 10, 0),
        (vec![1; 65], 10, 0),
    ] {
        let c = Checksum::Weighted {
            weights: weights.clone(),
            modulus,
            remainder,
        };
        for v in ["0", "", "00", &"0".repeat(65)] {
            assert!(!c.check(v), "{weights:?} {modulus} {remainder} {v:?}");
        }
    }
    let big = Checksum::weighted(vec![u32::MAX; 64], u32::MAX, u32::MAX - 1).unwrap();
    let _ = big.check(&"9".repeat(64));
}

#[test]
fn iban_registry_is_sorted_and_sane() {
    let r = iban_registry::BBAN_LENGTHS;
    assert!(r.len() >= 80, "{}", r.len());
    assert!(r.windows(2).all(|w| w[0].0 < w[1].0));
    for (cc, len) in r {
        assert!(cc.iter().all(u8::is_ascii_uppercase));
        assert!((8..=30).contains(len), "{cc:?} {len}");
    }
    // Every registry country with a zero BBAN of its length and the right
    // check digits.
    for (cc, len) in r {
        let cc = std::str::from_utf8(cc).unwrap();
        let bban = "0".repeat(usize::from(*len));
        let digits = (1..=98)
            .map(|d| format!("{cc}{d:02}{bban}"))
            .find(|v| Checksum::Iban.check(v));
        assert!(digits.is_some(), "{cc}");
    }
}

/// The compact digits of a valid value whose every single-digit change the
/// validator must reject.
fn detects_every_single_digit_change(checksum: &Checksum, valid: &str) -> Result<(), String> {
    if !checksum.check(valid) {
        return Err(format!("{checksum}: {valid} is not valid"));
    }
    for (i, c) in valid.char_indices() {
        let Some(d) = c.to_digit(10) else { continue };
        for e in 0..10u32 {
            if e == d {
                continue;
            }
            let mut changed = valid.to_string();
            changed.replace_range(i..i + 1, &e.to_string());
            if checksum.check(&changed) {
                return Err(format!("{checksum}: {valid} -> {changed} passes"));
            }
        }
    }
    Ok(())
}

/// The digit (or `X`) that makes `body` followed by it pass, if any.
fn complete(checksum: &Checksum, body: &str) -> Option<String> {
    "0123456789X"
        .chars()
        .map(|d| format!("{body}{d}"))
        .find(|v| checksum.check(v))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn single_digit_errors_are_detected(body in "[0-9]{1,40}") {
        for name in ["luhn", "verhoeff", "damm", "iso7064_mod11_10", "iso7064_mod11_2"] {
            let c = named(name);
            let v = complete(&c, &body);
            prop_assert!(v.is_some(), "{}: no check digit completes {}", name, body);
            if let Some(v) = v {
                detects_every_single_digit_change(&c, &v).map_err(TestCaseError::fail)?;
            }
        }
    }

    #[test]
    fn mod97_detects_single_digit_errors(body in "[0-9A-Za-z]{1,40}") {
        let v = (0..=99)
            .map(|d| format!("{body}{d:02}"))
            .find(|v| Checksum::Mod97.check(v));
        prop_assert!(v.is_some());
        if let Some(v) = v {
            detects_every_single_digit_change(&Checksum::Mod97, &v).map_err(TestCaseError::fail)?;
        }
    }

    /// The remainder reduced once every few characters is the one reduced
    /// at every character (the definition), across the parts, and over
    /// values long enough to need several reductions.
    #[test]
    fn mod97_remainder_is_that_of_the_whole_number(a in "[0-9A-Za-z]{0,70}", b in "[0-9A-Z]{0,6}") {
        let whole = format!("{a}{b}");
        let want = whole
            .bytes()
            .try_fold(0u32, |r, c| {
                let v = super::alnum_value(c)?;
                Some(if v < 10 { (r * 10 + v) % 97 } else { (r * 100 + v) % 97 })
            })
            .filter(|_| !whole.is_empty());
        prop_assert_eq!(super::mod97_remainder(&[a.as_bytes(), b.as_bytes()]), want);
    }

    #[test]
    fn iban_detects_single_digit_errors(i in 0usize..200, bban in "[0-9A-Z]{40}") {
        let (cc, len) = iban_registry::BBAN_LENGTHS[i % iban_registry::BBAN_LENGTHS.len()];
        let cc = std::str::from_utf8(&cc).unwrap();
        let bban = &bban[..usize::from(len)];
        let v = (0..=99)
            .map(|d| format!("{cc}{d:02}{bban}"))
            .find(|v| Checksum::Iban.check(v));
        prop_assert!(v.is_some());
        if let Some(v) = v {
            detects_every_single_digit_change(&Checksum::Iban, &v).map_err(TestCaseError::fail)?;
        }
    }

    /// The three weighted examples of [§16.2](docs/codons.md#s16-2) and the letter validators detect
    /// every single-digit error too (their weights are units of the modulus).
    /// `kr_rrn` and `jp_my_number` do not: their check digit folds two sums
    /// mod 11 into one digit (their oracle cases list the near misses that
    /// pass, as stdnum judges them).
    #[test]
    fn weighted_examples_and_letters_detect_single_digit_errors(body in "[0-9]{11}") {
        for c in [aba(), nhs(), pesel()] {
            let Checksum::Weighted { weights, .. } = &c else { unreachable!() };
            let n = weights.len();
            if let Some(v) = complete(&c, &body[..n - 1]) {
                detects_every_single_digit_change(&c, &v).map_err(TestCaseError::fail)?;
            }
        }
        for (c, prefix, len) in [
            (Checksum::EsNif, "", 8),
            (Checksum::EsNif, "X", 7),
            (Checksum::EsNif, "L", 7),
            (Checksum::SgNric, "S", 7),
            (Checksum::SgNric, "M", 7),
            (Checksum::Npi, "", 9),
        ] {
            let stem = format!("{prefix}{}", &body[..len]);
            let v = ('0'..='9').chain('A'..='Z')
                .map(|d| format!("{stem}{d}"))
                .find(|v| c.check(v));
            prop_assert!(v.is_some(), "{}: {}", c, stem);
            if let Some(v) = v {
                detects_every_single_digit_change(&c, &v).map_err(TestCaseError::fail)?;
            }
        }
    }

    /// A weighted form detects a change of digit i by δ exactly when
    /// wᵢ·δ ≢ 0 (mod m): weights that share a factor with the modulus miss
    /// some errors (weight 2 mod 10 misses a change by 5).
    #[test]
    fn weighted_detection_follows_the_weights(
        weights in prop::collection::vec(0u32..30, 1..12),
        modulus in 2u32..30,
        digits in "[0-9]{12}",
    ) {
        let n = weights.len();
        let digits: Vec<u32> = digits.bytes().take(n).map(|b| u32::from(b - b'0')).collect();
        let sum: u32 = weights.iter().zip(&digits).map(|(w, d)| w * d).sum();
        let c = Checksum::weighted(weights.clone(), modulus, sum % modulus).unwrap();
        let text: String = digits.iter().map(|d| char::from(b'0' + *d as u8)).collect();
        prop_assert!(c.check(&text));
        for i in 0..n {
            for e in 0..10u32 {
                if e == digits[i] {
                    continue;
                }
                let mut changed = digits.clone();
                changed[i] = e;
                let t: String = changed.iter().map(|d| char::from(b'0' + *d as u8)).collect();
                let delta = i64::from(e) - i64::from(digits[i]);
                let detected = (i64::from(weights[i]) * delta).rem_euclid(i64::from(modulus)) != 0;
                prop_assert_eq!(c.check(&t), !detected, "{} -> {}", text, t);
            }
        }
    }

    #[test]
    fn check_never_panics(
        value in ".{0,80}",
        bytes in "[0-9A-Za-z \\-./xX]{0,80}",
        weights in prop::collection::vec(any::<u32>(), 0..70),
        modulus in any::<u32>(),
        remainder in any::<u32>(),
    ) {
        let hand_made = Checksum::Weighted { weights, modulus, remainder };
        for name in NAMES {
            let c = named(name);
            let _ = c.check(&value);
            let _ = c.check(&bytes);
        }
        let _ = hand_made.check(&value);
        let _ = hand_made.check(&bytes);
    }

    #[test]
    fn the_compact_form_is_the_value_less_its_separators(
        value in proptest::collection::vec(
            // Separators are rare, as in values: most eight-byte words
            // hold none or one.
            prop_oneof![
                40 => prop::sample::select(b"09AMZnz,+\t\r_".to_vec()),
                1 => prop::sample::select(b" -./".to_vec()),
                1 => Just(0xa0u8),
            ],
            0..80,
        ),
    ) {
        let kept: Vec<u8> = value
            .iter()
            .copied()
            .filter(|b| !matches!(b, b' ' | b'-' | b'.' | b'/'))
            .collect();
        let expected = (!kept.is_empty() && kept.len() <= MAX_COMPACT_LEN && value.is_ascii())
            .then_some(kept);
        let text = String::from_utf8_lossy(&value).into_owned();
        let mut buf = [0u8; MAX_COMPACT_LEN];
        let got = compact(&text, &mut buf).map(<[u8]>::to_vec);
        prop_assert_eq!(got, expected);
        prop_assert_eq!(
            has_separator(&value),
            value.iter().any(|b| matches!(b, b' ' | b'-' | b'.' | b'/'))
        );
    }

    #[test]
    fn separators_never_change_the_verdict(value in "[0-9A-Z]{1,30}", seps in "[ \\-./]{0,8}", at in prop::collection::vec(0usize..31, 0..8)) {
        let mut spaced = value.clone();
        for (s, i) in seps.chars().zip(at) {
            let i = i.min(spaced.len());
            spaced.insert(i, s);
        }
        for name in NAMES {
            let c = named(name);
            prop_assert_eq!(c.check(&value), c.check(&spaced), "{} {:?}", name, spaced);
        }
    }
}
