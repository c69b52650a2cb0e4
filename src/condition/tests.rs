use super::*;
use proptest::prelude::*;

fn p(text: &str) -> Expr<String> {
    match parse(text) {
        Ok(e) => e,
        Err(e) => panic!("{text:?} does not parse: {e} (offset {})", e.offset),
    }
}

/// `(message, offset)` of a condition that must not parse.
fn err(text: &str) -> (String, usize) {
    match parse(text) {
        Ok(e) => panic!("{text:?} parses as {e:?}"),
        Err(e) => (e.message, e.offset),
    }
}

fn f(name: &str) -> Expr<String> {
    Expr::Field {
        field: name.to_owned(),
        value: true,
    }
}

fn f_false(name: &str) -> Expr<String> {
    Expr::Field {
        field: name.to_owned(),
        value: false,
    }
}

fn count(name: &str, cmp: Cmp, n: u32) -> Expr<String> {
    Expr::Count {
        field: name.to_owned(),
        cmp,
        n,
    }
}

fn not(e: Expr<String>) -> Expr<String> {
    Expr::Not(Box::new(e))
}

/// Parses, checks the tree and the canonical text, and that the canonical
/// text parses back to the same tree.
fn check(text: &str, tree: Expr<String>, canonical: &str) {
    let parsed = p(text);
    assert_eq!(parsed, tree, "{text:?}");
    assert_eq!(parsed.to_string(), canonical, "{text:?}");
    assert_eq!(p(canonical), tree, "{canonical:?}");
}

// ---- parsing, precedence, canonical text ----

#[test]
fn boolean_tests() {
    check("state.a", f("a"), "state.a");
    check("state.a == True", f("a"), "state.a");
    check("state.a is True", f("a"), "state.a");
    check("state.a == False", f_false("a"), "state.a == False");
    check("state.a is False", f_false("a"), "state.a == False");
    check("state.a==True", f("a"), "state.a");
    check("state.x1_y2", f("x1_y2"), "state.x1_y2");
    // a field name may spell a keyword: it is part of the `state.` word
    check(
        "state.not or state.and",
        Expr::Or(vec![f("not"), f("and")]),
        "state.not or state.and",
    );
}

#[test]
fn count_tests() {
    for (op, cmp) in [
        ("==", Cmp::Eq),
        ("!=", Cmp::Ne),
        ("<", Cmp::Lt),
        ("<=", Cmp::Le),
        (">", Cmp::Gt),
        (">=", Cmp::Ge),
    ] {
        let canonical = format!("len(state.m) {op} 2");
        check(&canonical, count("m", cmp, 2), &canonical);
        check(
            &format!("len(state.m){op}2"),
            count("m", cmp, 2),
            &canonical,
        );
        assert_eq!(cmp.as_str(), op);
    }
    check(
        "len(state.m) >= 007",
        count("m", Cmp::Ge, 7),
        "len(state.m) >= 7",
    );
    check(
        "len(state.m) <= 4294967295",
        count("m", Cmp::Le, u32::MAX),
        "len(state.m) <= 4294967295",
    );
    check(
        "len(state.m) > 0",
        count("m", Cmp::Gt, 0),
        "len(state.m) > 0",
    );
}

#[test]
fn precedence() {
    check(
        "state.a or state.b and state.c",
        Expr::Or(vec![f("a"), Expr::And(vec![f("b"), f("c")])]),
        "state.a or state.b and state.c",
    );
    check(
        "state.a and state.b or state.c",
        Expr::Or(vec![Expr::And(vec![f("a"), f("b")]), f("c")]),
        "state.a and state.b or state.c",
    );
    check(
        "not state.a and state.b",
        Expr::And(vec![not(f("a")), f("b")]),
        "not state.a and state.b",
    );
    check(
        "(state.a or state.b) and state.c",
        Expr::And(vec![Expr::Or(vec![f("a"), f("b")]), f("c")]),
        "(state.a or state.b) and state.c",
    );
    check("not not state.a", not(not(f("a"))), "not not state.a");
    check(
        "not (state.a or state.b)",
        not(Expr::Or(vec![f("a"), f("b")])),
        "not (state.a or state.b)",
    );
    check(
        "not (state.a and state.b)",
        not(Expr::And(vec![f("a"), f("b")])),
        "not (state.a and state.b)",
    );
    check(
        "not len(state.m) >= 2",
        not(count("m", Cmp::Ge, 2)),
        "not len(state.m) >= 2",
    );
    check(
        "not state.a == False",
        not(f_false("a")),
        "not state.a == False",
    );
}

#[test]
fn flattening_and_redundant_parentheses() {
    let or3 = Expr::Or(vec![f("a"), f("b"), f("c")]);
    check(
        "state.a or state.b or state.c",
        or3.clone(),
        "state.a or state.b or state.c",
    );
    check(
        "(state.a or state.b) or state.c",
        or3.clone(),
        "state.a or state.b or state.c",
    );
    check(
        "state.a or (state.b or state.c)",
        or3,
        "state.a or state.b or state.c",
    );
    let and3 = Expr::And(vec![f("a"), f("b"), f("c")]);
    check(
        "state.a and state.b and state.c",
        and3.clone(),
        "state.a and state.b and state.c",
    );
    check(
        "state.a and (state.b and state.c)",
        and3.clone(),
        "state.a and state.b and state.c",
    );
    check(
        "((state.a and state.b)) and state.c",
        and3,
        "state.a and state.b and state.c",
    );
    check("((state.a))", f("a"), "state.a");
    check(
        "(state.a and state.b) or state.c",
        Expr::Or(vec![Expr::And(vec![f("a"), f("b")]), f("c")]),
        "state.a and state.b or state.c",
    );
    check(
        "state.a and (state.b or state.c) and (state.d or state.e)",
        Expr::And(vec![
            f("a"),
            Expr::Or(vec![f("b"), f("c")]),
            Expr::Or(vec![f("d"), f("e")]),
        ]),
        "state.a and (state.b or state.c) and (state.d or state.e)",
    );
}

#[test]
fn whitespace() {
    check(
        " \t\nstate.a\r\n and\tnot(state.b)or(len(state.m)>=1) ",
        Expr::Or(vec![
            Expr::And(vec![f("a"), not(f("b"))]),
            count("m", Cmp::Ge, 1),
        ]),
        "state.a and not state.b or len(state.m) >= 1",
    );
}

#[test]
fn builtin_conditions() {
    assert_eq!(p("state.has_ssn is True").operator(), Operator::IsTrue);
    let e = p("state.has_email is True or state.has_phone is True or state.has_ip is True");
    assert_eq!(e.operator(), Operator::AnyTrue);
    assert_eq!(
        e.to_string(),
        "state.has_email or state.has_phone or state.has_ip"
    );
    assert_eq!(e.check_positive(), Ok(()));
}

// ---- errors ----

#[test]
fn error_examples() {
    let cases: &[(&str, &str, usize)] = &[
        (
            "state.abcde xor state.b",
            "at byte 12: expected `and`, `or` or the end, found `xor`",
            12,
        ),
        (
            "State.x",
            "at byte 0: expected `state.<field>`, `len(state.<field>)`, `not` or `(`, found `State.x`",
            0,
        ),
        ("state.X1", "at byte 6: field name `X1` must match [a-z][a-z0-9_]*", 6),
        (
            "state.a and state.b is 1",
            "at byte 23: `is` takes `True` or `False`",
            23,
        ),
        (
            "len(state.cnt) and state.a",
            "at byte 15: `len(...)` needs a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`) and an integer",
            15,
        ),
        ("", "is empty", 0),
        (" \t\r\n ", "is empty", 0),
        ("(state.ab))", "at byte 10: unbalanced parenthesis", 10),
        ("(state.a and state.b", "at byte 0: unbalanced parenthesis", 0),
        ("state.a or (state.b", "at byte 11: unbalanced parenthesis", 11),
        ("state.a)", "at byte 7: unbalanced parenthesis", 7),
    ];
    for &(text, message, offset) in cases {
        assert_eq!(err(text), (message.to_owned(), offset), "{text:?}");
    }
}

#[test]
fn syntax_errors() {
    let cases: &[(&str, &str, usize)] = &[
        // keywords are case-sensitive whole words
        (
            "state.a AND state.b",
            "at byte 8: expected `and`, `or` or the end, found `AND`",
            8,
        ),
        (
            "state.a andx state.b",
            "at byte 8: expected `and`, `or` or the end, found `andx`",
            8,
        ),
        (
            "Not state.a",
            "at byte 0: expected `state.<field>`, `len(state.<field>)`, `not` or `(`, found `Not`",
            0,
        ),
        (
            "notstate.a",
            "at byte 0: expected `state.<field>`, `len(state.<field>)`, `not` or `(`, found `notstate.a`",
            0,
        ),
        ("state.a is true", "at byte 11: `is` takes `True` or `False`", 11),
        ("state.a is", "at byte 10: `is` takes `True` or `False`", 10),
        ("state.a == TRUE", "at byte 11: `==` takes `True` or `False`", 11),
        (
            "state.m == 2",
            "at byte 11: `==` takes `True` or `False`; to compare a count, write `len(state.<field>) == 2`",
            11,
        ),
        (
            "state.a != True",
            "at byte 8: `!=` does not apply to `state.a`, which is true or false: write `== True`, \
             `== False`, `is True` or `is False`, or compare a count as in `len(state.<field>) != 1`",
            8,
        ),
        (
            "state.a = True",
            "at byte 8: `=` is not a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`)",
            8,
        ),
        (
            "state.a and",
            "at byte 11: expected `state.<field>`, `len(state.<field>)`, `not` or `(`, found the end",
            11,
        ),
        (
            "or state.a",
            "at byte 0: expected `state.<field>`, `len(state.<field>)`, `not` or `(`, found `or`",
            0,
        ),
        (
            "()",
            "at byte 1: expected `state.<field>`, `len(state.<field>)`, `not` or `(`, found `)`",
            1,
        ),
        (
            "(state.a state.b)",
            "at byte 9: expected `and`, `or` or `)`, found `state.b`",
            9,
        ),
        (
            "state.a state.b",
            "at byte 8: expected `and`, `or` or the end, found `state.b`",
            8,
        ),
        (
            "state.a && state.b",
            "at byte 8: expected `and`, `or` or the end, found `&&`",
            8,
        ),
        (
            "state.a == True == True",
            "at byte 16: expected `and`, `or` or the end, found `==`",
            16,
        ),
        (
            "state.a\u{a0}or state.b",
            "at byte 7: expected `and`, `or` or the end, found `\\u{a0}`",
            7,
        ),
        (
            "state.a \u{0}",
            "at byte 8: expected `and`, `or` or the end, found `\\u{0}`",
            8,
        ),
        // `state.<field>` is one word
        (
            "state. x",
            "at byte 6: `state.` must be followed directly by a field name (no whitespace)",
            6,
        ),
        (
            "state .x",
            "at byte 0: expected `state.<field>`, `len(state.<field>)`, `not` or `(`, found `state`",
            0,
        ),
        ("state._x", "at byte 6: field name `_x` must match [a-z][a-z0-9_]*", 6),
        ("state.1x", "at byte 6: field name `1x` must match [a-z][a-z0-9_]*", 6),
        ("state.a.b", "at byte 6: field name `a.b` must match [a-z][a-z0-9_]*", 6),
        ("state.café", "at byte 6: field name `café` must match [a-z][a-z0-9_]*", 6),
        (
            "state.aB or state.b",
            "at byte 6: field name `aB` must match [a-z][a-z0-9_]*",
            6,
        ),
    ];
    for &(text, message, offset) in cases {
        assert_eq!(err(text), (message.to_owned(), offset), "{text:?}");
    }
}

#[test]
fn count_errors() {
    let cases: &[(&str, &str, usize)] = &[
        (
            "len (state.m) > 0",
            "at byte 3: no whitespace is allowed inside `len(state.<field>)`",
            3,
        ),
        (
            "len( state.m) > 0",
            "at byte 4: no whitespace is allowed inside `len(state.<field>)`",
            4,
        ),
        (
            "len(state.m ) > 0",
            "at byte 11: no whitespace is allowed inside `len(state.<field>)`",
            11,
        ),
        ("len", "at byte 3: expected `(` right after `len`, found the end", 3),
        ("len state.m", "at byte 4: expected `(` right after `len`, found `state.m`", 4),
        (
            "len(m) > 0",
            "at byte 4: expected `state.<field>` right after `len(`, found `m`",
            4,
        ),
        (
            "len() > 0",
            "at byte 4: expected `state.<field>` right after `len(`, found `)`",
            4,
        ),
        ("len(state.M) > 0", "at byte 10: field name `M` must match [a-z][a-z0-9_]*", 10),
        (
            "len(state.m > 0",
            "at byte 12: expected `)` right after `len(state.m`, found `>`",
            12,
        ),
        (
            "len(state.m)",
            "at byte 12: `len(...)` needs a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`) and an integer",
            12,
        ),
        (
            "len(state.m) = 1",
            "at byte 13: `len(...)` needs a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`) and an integer",
            13,
        ),
        (
            "len(state.m) is 1",
            "at byte 13: `len(...)` needs a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`) and an integer",
            13,
        ),
        (
            "len(state.m) >= -1",
            "at byte 16: expected a non-negative integer (digits only, no sign) after `>=`, found `-`",
            16,
        ),
        (
            "len(state.m) >= +1",
            "at byte 16: expected a non-negative integer (digits only, no sign) after `>=`, found `+`",
            16,
        ),
        (
            "len(state.m) > 1.5",
            "at byte 15: expected a non-negative integer (digits only, no sign) after `>`, found `1.5`",
            15,
        ),
        (
            "len(state.m) > x",
            "at byte 15: expected a non-negative integer (digits only, no sign) after `>`, found `x`",
            15,
        ),
        (
            "len(state.m) <",
            "at byte 14: expected a non-negative integer (digits only, no sign) after `<`, found the end",
            14,
        ),
        (
            "len(state.m) > 4294967296",
            "at byte 15: integer `4294967296` is larger than 4294967295",
            15,
        ),
        (
            "len(state.m) > 99999999999999999999999999999999999999",
            "at byte 15: integer `99999999999999999999999999999999…` is larger than 4294967295",
            15,
        ),
    ];
    for &(text, message, offset) in cases {
        assert_eq!(err(text), (message.to_owned(), offset), "{text:?}");
    }
}

#[test]
fn length_limit() {
    let longest = format!("state.{}", "a".repeat(MAX_CONDITION_LEN - 6));
    assert_eq!(longest.len(), MAX_CONDITION_LEN);
    assert_eq!(p(&longest).check_positive(), Ok(()));
    let too_long = format!("{longest} ");
    assert_eq!(
        err(&too_long),
        ("is longer than 4096 bytes".to_owned(), MAX_CONDITION_LEN)
    );
    // 10 kB of `(`: refused by length before any parsing
    assert_eq!(
        err(&"(".repeat(10_000)),
        ("is longer than 4096 bytes".to_owned(), MAX_CONDITION_LEN)
    );
    assert_eq!(
        err(&"not ".repeat(2_500)),
        ("is longer than 4096 bytes".to_owned(), MAX_CONDITION_LEN)
    );
}

#[test]
fn long_tokens_are_cut_in_messages() {
    let name = "B".repeat(100);
    let (message, offset) = err(&format!("state.{name}"));
    assert_eq!(
        message,
        format!(
            "at byte 6: field name `{}…` must match [a-z][a-z0-9_]*",
            "B".repeat(32)
        )
    );
    assert_eq!(offset, 6);
}

#[test]
fn depth_limit() {
    let nested = |depth: usize| format!("{}state.a{}", "(".repeat(depth), ")".repeat(depth));
    assert_eq!(p(&nested(MAX_DEPTH)), f("a"));
    assert_eq!(
        err(&nested(MAX_DEPTH + 1)),
        ("nested more than 32 levels".to_owned(), 32)
    );

    let nots = |depth: usize| format!("{}state.a", "not ".repeat(depth));
    let mut expected = f("a");
    for _ in 0..MAX_DEPTH {
        expected = not(expected);
    }
    assert_eq!(p(&nots(MAX_DEPTH)), expected);
    assert_eq!(p(&expected.to_string()), expected);
    assert_eq!(
        err(&nots(MAX_DEPTH + 1)),
        ("nested more than 32 levels".to_owned(), 128)
    );

    // mixed: 16 × `not (` is 32 levels; one more `not` is too deep
    let mixed = format!("{}state.a{}", "not (".repeat(16), ")".repeat(16));
    assert!(parse(&mixed).is_ok());
    let (message, offset) = err(&format!("not {mixed}"));
    assert_eq!(
        (message.as_str(), offset),
        ("nested more than 32 levels", 83)
    );

    // siblings do not add up: depth is nesting, not count
    let siblings = vec!["(not state.a)"; 200].join(" or ");
    assert!(parse(&format!("state.b and ({siblings})")).is_ok());
}

#[test]
fn hostile_inputs_within_the_length_limit() {
    // the most `(` and `not` that fit: the depth error, no stack overflow
    assert_eq!(
        err(&"(".repeat(MAX_CONDITION_LEN)),
        ("nested more than 32 levels".to_owned(), 32)
    );
    assert_eq!(
        err(&"not ".repeat(MAX_CONDITION_LEN / 4)),
        ("nested more than 32 levels".to_owned(), 128)
    );
    assert_eq!(
        err(&"not(".repeat(MAX_CONDITION_LEN / 4)),
        ("nested more than 32 levels".to_owned(), 64)
    );
    assert_eq!(
        err(&")".repeat(MAX_CONDITION_LEN)),
        (
            "at byte 0: expected `state.<field>`, `len(state.<field>)`, `not` or `(`, found `)`"
                .to_owned(),
            0
        )
    );
    // long flat chains are fine
    let chain = vec!["state.a"; 300].join(" or ");
    assert!(chain.len() <= MAX_CONDITION_LEN);
    match p(&chain) {
        Expr::Or(items) => assert_eq!(items.len(), 300),
        other => panic!("{other:?}"),
    }
}

// ---- the positive-test rule ----

#[test]
fn positive_rule_accepts() {
    for text in [
        "state.a",
        "state.a == True",
        "state.a is True",
        "len(state.m) >= 1",
        "len(state.m) > 0",
        "len(state.m) == 2",
        "state.a and not state.b",
        "(state.a or state.b) and len(state.m) < 5",
        "state.a and state.b == False",
        "state.a or len(state.m) > 3",
        "state.a and (not state.b or state.c)",
        "state.a and not state.a",
    ] {
        assert_eq!(p(text).check_positive(), Ok(()), "{text:?}");
    }
}

#[test]
fn positive_rule_rejects() {
    for text in [
        "not state.a",
        "state.a == False",
        "state.a is False",
        "len(state.m) >= 0",
        "len(state.m) < 3",
        "len(state.m) <= 3",
        "len(state.m) != 0",
        "len(state.m) == 0",
        "not not state.a",
        "not (not state.a)",
        "not state.a and not state.b",
        "not (state.a or state.b)",
    ] {
        assert_eq!(
            p(text).check_positive(),
            Err(
                "has no positive test outside every `not` (a test such as `state.x` or \
                 `len(state.x) >= 1`)"
                    .to_owned()
            ),
            "{text:?}"
        );
    }
    for (text, culprit) in [
        ("state.a or not state.b", "not state.b"),
        ("state.a or len(state.m) < 3", "len(state.m) < 3"),
        ("state.a or state.b == False", "state.b == False"),
        ("len(state.m) != 1 or state.a", "len(state.m) != 1"),
        ("(state.a or not state.b) and not state.c", "not state.b"),
        (
            "state.a or not state.b and state.c == False",
            "not state.b and state.c == False",
        ),
        (
            "state.a or not state.b and not state.c",
            "not state.b and not state.c",
        ),
        (
            "state.a or not (state.b and state.c)",
            "not (state.b and state.c)",
        ),
    ] {
        assert_eq!(
            p(text).check_positive(),
            Err(format!(
                "is true when no codon matched: `{culprit}` holds on a text with no match"
            )),
            "{text:?}"
        );
    }
}

#[test]
fn positive_fields_and_fields() {
    let e = p("state.a and not state.b or len(state.m) > 0 and state.a or len(state.n) < 2");
    assert_eq!(e.positive_fields(), vec!["a", "m"]);
    assert_eq!(
        e.fields(),
        vec![
            (&"a".to_owned(), FieldKind::Bool),
            (&"b".to_owned(), FieldKind::Bool),
            (&"m".to_owned(), FieldKind::Count),
            (&"n".to_owned(), FieldKind::Count),
        ]
    );
    let e = p("state.m and len(state.m) > 0 and not state.z and state.m == False");
    assert_eq!(e.positive_fields(), vec!["m"]);
    assert_eq!(
        e.fields(),
        vec![
            (&"m".to_owned(), FieldKind::Bool),
            (&"m".to_owned(), FieldKind::Count),
            (&"z".to_owned(), FieldKind::Bool),
        ]
    );
    assert!(p("not not state.a").positive_fields().is_empty());
    assert_eq!(p("len(state.m) == 1").positive_fields(), vec!["m"]);
    assert!(p("len(state.m) == 0").positive_fields().is_empty());
}

// ---- operator ----

#[test]
fn operators() {
    let cases = [
        ("state.a", Operator::IsTrue),
        ("state.a == True", Operator::IsTrue),
        ("state.a is True", Operator::IsTrue),
        ("(state.a)", Operator::IsTrue),
        ("state.a or state.b", Operator::AnyTrue),
        (
            "state.a is True or state.b or state.c == True",
            Operator::AnyTrue,
        ),
        ("state.a and state.b", Operator::AllTrue),
        ("state.a and state.b is True and state.c", Operator::AllTrue),
        ("len(state.m) >= 3", Operator::CountGte(3)),
        ("len(state.m) >= 1", Operator::CountGte(1)),
        ("state.a or state.b == False", Operator::Expression),
        ("len(state.m) > 1", Operator::Expression),
        ("len(state.m) == 1", Operator::Expression),
        ("state.a == False", Operator::Expression),
        ("not state.a", Operator::Expression),
        ("state.a and not state.b", Operator::Expression),
        ("state.a or state.b and state.c", Operator::Expression),
        ("state.a or len(state.m) >= 1", Operator::Expression),
        (
            "len(state.m) >= 1 and len(state.n) >= 1",
            Operator::Expression,
        ),
    ];
    for (text, operator) in cases {
        assert_eq!(p(text).operator(), operator, "{text:?}");
    }
    assert_eq!(Operator::IsTrue.as_str(), "is_true");
    assert_eq!(Operator::AnyTrue.as_str(), "any_true");
    assert_eq!(Operator::AllTrue.as_str(), "all_true");
    assert_eq!(Operator::CountGte(2).as_str(), "count_gte");
    assert_eq!(Operator::Expression.as_str(), "expression");
}

// ---- evaluation ----

#[test]
fn eval_boolean_truth_table() {
    let e = p("state.a or state.b and not state.c");
    let g = p("(state.a or state.b) and state.c == False");
    for bits in 0..8u8 {
        let (a, b, c) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
        let field = |name: &String| match name.as_str() {
            "a" => a,
            "b" => b,
            "c" => c,
            other => panic!("{other}"),
        };
        let none = |_: &String| -> u64 { panic!("no count is read") };
        assert_eq!(e.eval(&field, &none), a || (b && !c), "{bits}");
        assert_eq!(g.eval(&field, &none), (a || b) && !c, "{bits}");
    }
}

#[test]
fn eval_counts() {
    for (op, cmp) in [
        ("==", Cmp::Eq),
        ("!=", Cmp::Ne),
        ("<", Cmp::Lt),
        ("<=", Cmp::Le),
        (">", Cmp::Gt),
        (">=", Cmp::Ge),
    ] {
        let e = p(&format!("len(state.m) {op} 2"));
        let got: Vec<bool> = (0..5u64).map(|k| e.eval(&|_| false, &|_| k)).collect();
        let expected: Vec<bool> = (0..5u64)
            .map(|k| match cmp {
                Cmp::Eq => k == 2,
                Cmp::Ne => k != 2,
                Cmp::Lt => k < 2,
                Cmp::Le => k <= 2,
                Cmp::Gt => k > 2,
                Cmp::Ge => k >= 2,
            })
            .collect();
        assert_eq!(got, expected, "{op}");
    }
    // counts above u32::MAX compare correctly
    let e = p("len(state.m) > 4294967295");
    assert!(e.eval(&|_| false, &|_| u64::from(u32::MAX) + 1));
    assert!(!e.eval(&|_| false, &|_| u64::from(u32::MAX)));

    let e = p("state.a and len(state.m) >= 2 or len(state.n) == 0");
    let run =
        |a: bool, m: u64, n: u64| e.eval(&|_| a, &|name: &String| if name == "m" { m } else { n });
    assert!(run(true, 2, 1));
    assert!(!run(true, 1, 1));
    assert!(!run(false, 5, 1));
    assert!(run(false, 0, 0));
}

#[test]
fn cmp_holds() {
    assert!(Cmp::Eq.holds(3, 3) && !Cmp::Eq.holds(3, 4));
    assert!(Cmp::Ne.holds(3, 4) && !Cmp::Ne.holds(3, 3));
    assert!(Cmp::Lt.holds(3, 4) && !Cmp::Lt.holds(4, 4));
    assert!(Cmp::Le.holds(4, 4) && !Cmp::Le.holds(5, 4));
    assert!(Cmp::Gt.holds(5, 4) && !Cmp::Gt.holds(4, 4));
    assert!(Cmp::Ge.holds(4, 4) && !Cmp::Ge.holds(3, 4));
}

// ---- try_map ----

#[test]
fn try_map_resolves_names() {
    let e = p("state.a or not state.b and len(state.m) > 1");
    let mut seen = Vec::new();
    let mapped = e.try_map(&mut |name: String, kind| -> Result<usize, String> {
        seen.push((name.clone(), kind));
        Ok(name.len() + if kind == FieldKind::Count { 100 } else { 0 })
    });
    assert_eq!(
        mapped,
        Ok(Expr::Or(vec![
            Expr::Field {
                field: 1,
                value: true
            },
            Expr::And(vec![
                Expr::Not(Box::new(Expr::Field {
                    field: 1,
                    value: true
                })),
                Expr::Count {
                    field: 101,
                    cmp: Cmp::Gt,
                    n: 1
                },
            ]),
        ]))
    );
    assert_eq!(
        seen,
        vec![
            ("a".to_owned(), FieldKind::Bool),
            ("b".to_owned(), FieldKind::Bool),
            ("m".to_owned(), FieldKind::Count),
        ]
    );
}

#[test]
fn try_map_collects_every_error_in_order() {
    let e = p("state.x or state.ok and (len(state.z) > 0 or not state.y) and state.ok");
    let known = ["ok"];
    let mut calls = 0;
    let mapped = e.try_map(&mut |name: String, kind| {
        calls += 1;
        if known.contains(&name.as_str()) {
            Ok(0usize)
        } else {
            Err(format!("{name}:{kind:?}"))
        }
    });
    assert_eq!(
        mapped,
        Err(vec![
            "x:Bool".to_owned(),
            "z:Count".to_owned(),
            "y:Bool".to_owned(),
        ])
    );
    assert_eq!(calls, 5);
}

#[test]
fn display_of_hand_built_trees() {
    let e: Expr<usize> = Expr::And(vec![
        Expr::Field {
            field: 3,
            value: true,
        },
        Expr::Count {
            field: 7,
            cmp: Cmp::Le,
            n: 9,
        },
    ]);
    assert_eq!(e.to_string(), "state.3 and len(state.7) <= 9");
    // non-canonical trees print without panicking
    assert_eq!(Expr::<String>::Or(vec![]).to_string(), "");
    assert_eq!(Expr::Or(vec![f("a")]).to_string(), "state.a");
    assert_eq!(
        Expr::Or(vec![Expr::Or(vec![f("a"), f("b")]), f("c")]).to_string(),
        "state.a or state.b or state.c"
    );
    assert!(!Expr::<String>::Or(vec![]).eval(&|_| true, &|_| 1));
    assert!(Expr::<String>::And(vec![]).eval(&|_| false, &|_| 0));
}

#[test]
fn error_display_is_the_message() {
    let e = parse("state.a xor").unwrap_err();
    assert_eq!(e.to_string(), e.message);
}

// ---- properties ----

fn arb_name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,6}"
}

fn arb_cmp() -> impl Strategy<Value = Cmp> {
    prop_oneof![
        Just(Cmp::Eq),
        Just(Cmp::Ne),
        Just(Cmp::Lt),
        Just(Cmp::Le),
        Just(Cmp::Gt),
        Just(Cmp::Ge),
    ]
}

/// An `Or` or `And` of `items`, flattened as the parser flattens.
fn junction(items: Vec<Expr<String>>, or: bool) -> Expr<String> {
    let mut out = Vec::new();
    for e in items {
        match e {
            Expr::Or(inner) if or => out.extend(inner),
            Expr::And(inner) if !or => out.extend(inner),
            e => out.push(e),
        }
    }
    if or {
        Expr::Or(out)
    } else {
        Expr::And(out)
    }
}

/// Canonical trees of depth at most 4.
fn arb_expr() -> impl Strategy<Value = Expr<String>> {
    let leaf = prop_oneof![
        (arb_name(), any::<bool>()).prop_map(|(field, value)| Expr::Field { field, value }),
        (arb_name(), arb_cmp(), prop_oneof![0u32..4, any::<u32>()])
            .prop_map(|(field, cmp, n)| Expr::Count { field, cmp, n }),
    ];
    leaf.prop_recursive(4, 64, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(|e| Expr::Not(Box::new(e))),
            prop::collection::vec(inner.clone(), 2..5).prop_map(|v| junction(v, true)),
            prop::collection::vec(inner, 2..5).prop_map(|v| junction(v, false)),
        ]
    })
}

/// Texts made of the language's tokens, most of them nonsense.
fn arb_token_soup() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec![
        "state.a",
        "state.b",
        "state.",
        "len(state.m)",
        "len",
        "(",
        ")",
        "and",
        "or",
        "not",
        "is",
        "True",
        "False",
        "==",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "=",
        "0",
        "1",
        "4294967296",
        "-",
        "x",
        "\t",
        "\n",
        "",
        " ",
    ]);
    prop::collection::vec((token, prop::bool::ANY), 0..40).prop_map(|parts| {
        parts
            .into_iter()
            .map(|(t, space)| if space { format!("{t} ") } else { t.to_owned() })
            .collect()
    })
}

/// Whatever `parse` says about `text`, consistently.
fn check_any(text: &str) -> Result<(), TestCaseError> {
    match parse(text) {
        Ok(e) => {
            let canonical = e.to_string();
            prop_assert_eq!(parse(&canonical), Ok(e.clone()), "{}", canonical);
            if e.check_positive().is_ok() {
                prop_assert!(!e.eval(&|_| false, &|_| 0));
                prop_assert!(!e.positive_fields().is_empty());
            }
            let _ = (e.operator(), e.fields());
        }
        Err(e) => {
            prop_assert!(e.offset <= text.len());
            prop_assert!(text.is_char_boundary(e.offset));
            prop_assert!(!e.message.is_empty());
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn display_parses_back(e in arb_expr()) {
        let text = e.to_string();
        prop_assert_eq!(parse(&text), Ok(e.clone()), "{}", text);
    }

    #[test]
    fn check_positive_agrees_with_eval(e in arb_expr()) {
        match e.check_positive() {
            Ok(()) => {
                prop_assert!(!e.eval(&|_| false, &|_| 0));
                prop_assert!(!e.positive_fields().is_empty());
            }
            Err(message) => prop_assert!(
                e.eval(&|_| false, &|_| 0) || e.positive_fields().is_empty(),
                "{}", message
            ),
        }
    }

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>()) {
        check_any(&text)?;
    }

    #[test]
    fn token_soup_never_panics(text in arb_token_soup()) {
        check_any(&text)?;
    }

    #[test]
    fn ascii_noise_never_panics(text in "[a-zA-Z0-9_.()=!<>+\\- \t\n]{0,80}") {
        check_any(&text)?;
    }
}
