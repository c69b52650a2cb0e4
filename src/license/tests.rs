use super::*;
use time::Duration;

fn setup(
    dir: &Path,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
) -> (PathBuf, IssuerKeys) {
    let kg = keygen("test-issuer", dir).unwrap();
    let out = dir.join("lic.hxlic");
    issue_license(&IssueRequest {
        issuer_key: kg.secret_path,
        license_id: "lic_test_0001".into(),
        licensee: "Test Corp".into(),
        tier: "DEVELOPER".into(),
        packs: vec!["compliance.*".into()],
        solvers: vec!["z3*".into()],
        features: vec![],
        not_before,
        not_after,
        issued_at: not_before,
        out: out.clone(),
    })
    .unwrap();
    // The directory minus the `.key` file is a valid issuer-keys directory.
    let keys = IssuerKeys::from_path(dir).unwrap();
    (out, keys)
}

#[test]
fn issued_license_verifies_and_entitles() {
    let tmp = tempfile::tempdir().unwrap();
    let now = OffsetDateTime::now_utc();
    let (path, keys) = setup(tmp.path(), now - Duration::days(1), now + Duration::days(1));
    let lic = License::load(&path, &keys, now).unwrap();
    assert_eq!(lic.license_id, "lic_test_0001");
    assert!(lic.check_pack("compliance.regulatory_pii_guard.v1").is_ok());
    assert!(matches!(
        lic.check_pack("custom.x.v1"),
        Err(LicenseError::Entitlement(_))
    ));
    assert!(lic.check_solvers(&["z3-4.12"]).is_ok());
    assert!(matches!(
        lic.check_solvers(&["cvc5"]),
        Err(LicenseError::Entitlement(_))
    ));
}

#[test]
fn edited_license_fails_signature() {
    let tmp = tempfile::tempdir().unwrap();
    let now = OffsetDateTime::now_utc();
    let (path, keys) = setup(tmp.path(), now - Duration::days(1), now + Duration::days(1));
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("Test Corp", "Evil Corp");
    let lic = License::parse(text.as_bytes(), "edited").unwrap();
    assert!(
        matches!(lic.verify(&keys), Err(LicenseError::Signature(m)) if m.contains("does not verify"))
    );
    assert!(
        matches!(lic.verify(&IssuerKeys::none()), Err(LicenseError::Signature(m)) if m.contains("no issuer keys"))
    );
}

#[test]
fn window_is_half_open() {
    let tmp = tempfile::tempdir().unwrap();
    let t0 = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
    let (path, keys) = setup(tmp.path(), t0, t0 + Duration::hours(1));
    let lic = License::read(&path).unwrap();
    lic.verify(&keys).unwrap();
    assert!(lic.check_window(t0).is_ok());
    assert!(matches!(
        lic.check_window(t0 - Duration::seconds(1)),
        Err(LicenseError::NotYetValid(_))
    ));
    assert!(matches!(
        lic.check_window(t0 + Duration::hours(1)),
        Err(LicenseError::Expired(_))
    ));
    assert_eq!(lic.seconds_left(t0 + Duration::hours(2)), 0);
}

#[test]
fn malformed_fields_are_named() {
    let err = License::parse(b"not json", "x.hxlic").unwrap_err();
    assert!(
        matches!(err, LicenseError::Invalid(m) if m.contains("x.hxlic") && m.contains("not valid JSON"))
    );
    let err = License::parse(
        br#"{"signature":"AAAA","format":"helixor.license.v1"}"#,
        "x",
    )
    .unwrap_err();
    assert!(matches!(err, LicenseError::Invalid(m) if m.contains("content_key")));
}

#[test]
fn times_format_and_parse() {
    let t = parse_time("2026-11-30T01:02:03.5+01:00").unwrap();
    assert_eq!(format_time(t), "2026-11-30T00:02:03Z");
    assert!(parse_time("yesterday").is_none());
}
