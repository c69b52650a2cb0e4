//! The hard-rule condition language of [§16.3](docs/codons.md#s16-3): parsing a condition
//! ([`parse`]) into an [`Expr`], the positive-test rule
//! ([`Expr::check_positive`]), evaluation ([`Expr::eval`]), the manifest's
//! `operator` ([§16.4](docs/codons.md#s16-4), [`Expr::operator`]) and the canonical text
//! ([`Expr`]'s `Display`).
//!
//! This module only handles condition texts and trees: it must not touch the
//! engine, playbooks or any I/O. It never panics, on any input.
//!
//! # Syntax
//!
//! ```text
//! condition := term ("or" term)*
//! term      := factor ("and" factor)*
//! factor    := "not" factor | "(" condition ")" | test
//! test      := "state." FIELD [("==" | "is") ("True" | "False")]
//!            | "len(state." MATCHES ")" ("==" | "!=" | "<" | "<=" | ">" | ">=") INTEGER
//! ```
//!
//! - `FIELD` and `MATCHES` match `[a-z][a-z0-9_]*`; whether a name is some
//!   codon's `binds_to` or `matches_field` is the caller's business
//!   ([`Expr::try_map`]). A field name may spell a keyword (`state.not`).
//! - `INTEGER` is ASCII digits, without a sign, at most [`u32::MAX`]; leading
//!   zeros are allowed (`007` is 7).
//! - Tokens are separated by optional ASCII whitespace (space, tab, line
//!   feed, form feed, carriage return); any other character (a no-break
//!   space included) is an error.
//! - `state.<field>` is one word: no whitespace after `state.`.
//!   `len(state.<field>)` is one unit too: no whitespace anywhere inside it,
//!   before the `)` included (`len(state.m )` is an error).
//! - The keywords `and`, `or`, `not`, `is`, `True` and `False` are
//!   case-sensitive whole words: `AND` and `andx` are not `and`.
//! - Precedence: `not` binds tighter than `and`, which binds tighter than
//!   `or`. Parentheses only group: `(a or b) or c` is the same [`Expr::Or`]
//!   of three as `a or b or c`.
//! - A condition is at most [`MAX_CONDITION_LEN`] bytes and nests `not`s and
//!   parentheses at most [`MAX_DEPTH`] deep, so the recursive-descent parser
//!   (one token of lookahead, no backtracking) uses bounded stack and linear
//!   time on hostile input.

#[cfg(test)]
mod tests;

use std::fmt;

/// The longest condition, in bytes; a longer one is an error.
pub const MAX_CONDITION_LEN: usize = 4096;

/// The deepest nesting of `not`s and parentheses (each `not` and each `(`
/// is one level); a deeper one is an error.
pub const MAX_DEPTH: usize = 32;

/// The comparison of a `len(state.<field>)` test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Cmp {
    /// Whether `left <op> right` holds (the count on the left).
    pub fn holds(self, left: u64, right: u64) -> bool {
        match self {
            Cmp::Eq => left == right,
            Cmp::Ne => left != right,
            Cmp::Lt => left < right,
            Cmp::Le => left <= right,
            Cmp::Gt => left > right,
            Cmp::Ge => left >= right,
        }
    }

    /// The operator as written in a condition (`==`, `!=`, `<`, `<=`, `>`,
    /// `>=`).
    pub fn as_str(self) -> &'static str {
        match self {
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }

    fn from_op(text: &str) -> Option<Cmp> {
        Some(match text {
            "==" => Cmp::Eq,
            "!=" => Cmp::Ne,
            "<" => Cmp::Lt,
            "<=" => Cmp::Le,
            ">" => Cmp::Gt,
            ">=" => Cmp::Ge,
            _ => return None,
        })
    }
}

/// A parsed condition, generic over how a field is named: `String` after
/// [`parse`], whatever the caller resolves names to (an index, say) after
/// [`Expr::try_map`].
///
/// [`parse`] gives canonical trees: every `Or` and `And` has at least two
/// operands and none directly holds another of its own kind (`a or b or c`
/// and `(a or b) or c` are one `Or` of three). `Display` prints the canonical
/// text, not the original spelling: `state.x is True` prints as `state.x`,
/// `state.x is False` as `state.x == False`, whitespace is normalised and
/// parentheses appear only where precedence needs them. For a canonical
/// `Expr<String>` whose field names match `[a-z][a-z0-9_]*`,
/// `parse(&e.to_string()) == Ok(e)`. A hand-built `Or` or `And` of fewer
/// than two operands prints as its operands alone (nothing for none), which
/// may not parse back; evaluated, an empty `Or` is false and an empty `And`
/// true.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr<F> {
    /// `a or b or …`: true when any operand is.
    Or(Vec<Expr<F>>),
    /// `a and b and …`: true when every operand is.
    And(Vec<Expr<F>>),
    /// `not a`.
    Not(Box<Expr<F>>),
    /// `state.F` and `state.F == True` / `state.F is True` (value true),
    /// `state.F == False` / `state.F is False` (value false): true when the
    /// boolean field equals `value`.
    Field {
        /// The state field (a codon's `binds_to`).
        field: F,
        /// The value the test asks for.
        value: bool,
    },
    /// `len(state.F) <cmp> n`: true when the field's count of values compares
    /// so with `n`.
    Count {
        /// The counted field (a codon's `matches_field`).
        field: F,
        /// The comparison.
        cmp: Cmp,
        /// The right-hand side.
        n: u32,
    },
}

/// What a field read by a condition holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// A boolean, read by `state.F` (a codon's `binds_to`).
    Bool,
    /// A count of values, read by `len(state.F)` (a codon's
    /// `matches_field`).
    Count,
}

/// The manifest's `operator` of a hard rule ([§16.4](docs/codons.md#s16-4)), derived from its
/// condition by [`Expr::operator`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `is_true`: one positive boolean test.
    IsTrue,
    /// `any_true`: an `or` of two or more positive boolean tests.
    AnyTrue,
    /// `all_true`: an `and` of two or more positive boolean tests.
    AllTrue,
    /// `count_gte`: one `len(state.F) >= k`, the threshold `k`.
    CountGte(u32),
    /// `expression`: anything else.
    Expression,
}

impl Operator {
    /// The manifest's spelling: `is_true`, `any_true`, `all_true`,
    /// `count_gte` or `expression` (the threshold of `count_gte` is a
    /// separate manifest key).
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::IsTrue => "is_true",
            Operator::AnyTrue => "any_true",
            Operator::AllTrue => "all_true",
            Operator::CountGte(_) => "count_gte",
            Operator::Expression => "expression",
        }
    }
}

/// A condition that does not parse.
///
/// The message is lowercase and meant to follow the condition's name (as in
/// ``hard_rules[1].condition: at byte 12: expected `and`, `or` or the end,
/// found `xor` ``): it names the offending part, its byte offset (except for
/// the whole-text errors `is empty`, ``is longer than 4096 bytes`` and
/// `nested more than 32 levels`) and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConditionError {
    /// What is wrong, where, and what was expected.
    pub message: String,
    /// The byte offset of the offending part in the condition (a character
    /// boundary, at most the condition's length): the token that is wrong or
    /// the place where something is missing; 0 for an empty condition,
    /// [`MAX_CONDITION_LEN`] for a too long one, the `(` or `not` one level
    /// too deep for a too deep one.
    pub offset: usize,
}

/// Parses a condition (see the [module](self) for the syntax).
///
/// The result is canonical (see [`Expr`]); it is not yet checked against
/// the positive-test rule ([`Expr::check_positive`]) nor against the
/// playbook's fields ([`Expr::try_map`]).
pub fn parse(text: &str) -> Result<Expr<String>, ConditionError> {
    if text.len() > MAX_CONDITION_LEN {
        return Err(ConditionError {
            message: format!("is longer than {MAX_CONDITION_LEN} bytes"),
            offset: MAX_CONDITION_LEN,
        });
    }
    let tokens = tokenize(text);
    if tokens.is_empty() {
        return Err(ConditionError {
            message: "is empty".to_owned(),
            offset: 0,
        });
    }
    let mut parser = Parser {
        tokens,
        pos: 0,
        depth: 0,
        end: text.len(),
    };
    let expr = parser.condition()?;
    match parser.peek() {
        None => Ok(expr),
        Some(t) if t.class == Class::Close => Err(at(t.start, "unbalanced parenthesis")),
        Some(t) => Err(at(
            t.start,
            format_args!("expected `and`, `or` or the end, found {}", quote(t.text)),
        )),
    }
}

impl<F> Expr<F> {
    /// Maps every field through `f`, which is told what the field holds
    /// ([`FieldKind::Bool`] for `state.F`, [`FieldKind::Count`] for
    /// `len(state.F)`), keeping the tree's shape. Every field is mapped, in
    /// order of appearance, even after a failure: the error is every error
    /// `f` returned, in that order.
    pub fn try_map<G, E>(
        self,
        f: &mut impl FnMut(F, FieldKind) -> Result<G, E>,
    ) -> Result<Expr<G>, Vec<E>> {
        let mut errors = Vec::new();
        match self.map_into(f, &mut errors) {
            Some(mapped) if errors.is_empty() => Ok(mapped),
            _ => Err(errors),
        }
    }

    fn map_into<G, E>(
        self,
        f: &mut impl FnMut(F, FieldKind) -> Result<G, E>,
        errors: &mut Vec<E>,
    ) -> Option<Expr<G>> {
        let mut keep = |result: Result<G, E>| match result {
            Ok(g) => Some(g),
            Err(e) => {
                errors.push(e);
                None
            }
        };
        match self {
            Expr::Or(items) => map_all(items, f, errors).map(Expr::Or),
            Expr::And(items) => map_all(items, f, errors).map(Expr::And),
            Expr::Not(inner) => inner.map_into(f, errors).map(|e| Expr::Not(Box::new(e))),
            Expr::Field { field, value } => {
                keep(f(field, FieldKind::Bool)).map(|field| Expr::Field { field, value })
            }
            Expr::Count { field, cmp, n } => {
                keep(f(field, FieldKind::Count)).map(|field| Expr::Count { field, cmp, n })
            }
        }
    }

    /// Evaluates the condition: `field` says whether a boolean field is true,
    /// `count` how many values a counted field holds.
    pub fn eval(&self, field: &impl Fn(&F) -> bool, count: &impl Fn(&F) -> u64) -> bool {
        match self {
            Expr::Or(items) => items.iter().any(|e| e.eval(field, count)),
            Expr::And(items) => items.iter().all(|e| e.eval(field, count)),
            Expr::Not(inner) => !inner.eval(field, count),
            Expr::Field { field: f, value } => field(f) == *value,
            Expr::Count { field: f, cmp, n } => cmp.holds(count(f), u64::from(*n)),
        }
    }

    /// The fields read by positive tests outside every `not` (`state.F`,
    /// `state.F == True`, `len(state.F) >= k` with k ≥ 1, `> k`, `== k` with
    /// k ≥ 1), in order of appearance, each once. A name read both as a
    /// boolean and as a count appears once.
    pub fn positive_fields(&self) -> Vec<&F>
    where
        F: PartialEq,
    {
        let mut out = Vec::new();
        self.collect_positive(&mut out);
        out
    }

    fn collect_positive<'a>(&'a self, out: &mut Vec<&'a F>)
    where
        F: PartialEq,
    {
        match self {
            Expr::Or(items) | Expr::And(items) => {
                for e in items {
                    e.collect_positive(out);
                }
            }
            Expr::Not(_) => {}
            Expr::Field { field, .. } | Expr::Count { field, .. } => {
                if self.is_positive_test() && !out.contains(&field) {
                    out.push(field);
                }
            }
        }
    }

    /// Every field read, with what it holds, in order of appearance, each
    /// `(field, kind)` pair once (a name read both by `state.F` and by
    /// `len(state.F)` appears twice, once per kind).
    pub fn fields(&self) -> Vec<(&F, FieldKind)>
    where
        F: PartialEq,
    {
        let mut out = Vec::new();
        self.collect_fields(&mut out);
        out
    }

    fn collect_fields<'a>(&'a self, out: &mut Vec<(&'a F, FieldKind)>)
    where
        F: PartialEq,
    {
        let read = match self {
            Expr::Or(items) | Expr::And(items) => {
                for e in items {
                    e.collect_fields(out);
                }
                return;
            }
            Expr::Not(inner) => return inner.collect_fields(out),
            Expr::Field { field, .. } => (field, FieldKind::Bool),
            Expr::Count { field, .. } => (field, FieldKind::Count),
        };
        if !out.contains(&read) {
            out.push(read);
        }
    }

    /// The manifest's `operator` ([§16.4](docs/codons.md#s16-4)): [`Operator::IsTrue`] for one
    /// positive boolean test (`state.F`, `state.F == True`,
    /// `state.F is True`), [`Operator::AnyTrue`] for an `or` of two or more
    /// of them, [`Operator::AllTrue`] for an `and` of two or more of them,
    /// [`Operator::CountGte`] for one `len(state.F) >= k` (any k), else
    /// [`Operator::Expression`] (`state.a or state.b == False`,
    /// `len(state.m) > 1`, `not state.a`…).
    pub fn operator(&self) -> Operator {
        let positive_bool = |e: &Expr<F>| matches!(e, Expr::Field { value: true, .. });
        match self {
            Expr::Field { value: true, .. } => Operator::IsTrue,
            Expr::Or(items) if items.len() >= 2 && items.iter().all(positive_bool) => {
                Operator::AnyTrue
            }
            Expr::And(items) if items.len() >= 2 && items.iter().all(positive_bool) => {
                Operator::AllTrue
            }
            Expr::Count {
                cmp: Cmp::Ge, n, ..
            } => Operator::CountGte(*n),
            _ => Operator::Expression,
        }
    }

    /// Whether this is a positive test: one false when no codon matched
    /// whatever else holds.
    fn is_positive_test(&self) -> bool {
        match self {
            Expr::Field { value, .. } => *value,
            Expr::Count { cmp, n, .. } => match cmp {
                Cmp::Ge | Cmp::Eq => *n >= 1,
                Cmp::Gt => true,
                Cmp::Ne | Cmp::Lt | Cmp::Le => false,
            },
            Expr::Or(_) | Expr::And(_) | Expr::Not(_) => false,
        }
    }

    /// Whether the condition holds when no codon matched (every field false,
    /// every count 0).
    fn holds_on_no_match(&self) -> bool {
        self.eval(&|_| false, &|_| 0)
    }

    /// The smallest part that makes this condition, true when no codon
    /// matched, so: in an `or`, the first operand true on no match; in an
    /// `and` (whose operands are all true on no match), the first operand
    /// holding a positive test, which was meant to be false; else the part
    /// itself.
    fn no_match_culprit(&self) -> &Expr<F>
    where
        F: PartialEq,
    {
        let next = match self {
            Expr::Or(items) => items.iter().find(|e| e.holds_on_no_match()),
            Expr::And(items) => items.iter().find(|e| !e.positive_fields().is_empty()),
            _ => None,
        };
        next.map_or(self, |e| e.no_match_culprit())
    }
}

/// Maps every operand, all of them even after a failure.
fn map_all<F, G, E>(
    items: Vec<Expr<F>>,
    f: &mut impl FnMut(F, FieldKind) -> Result<G, E>,
    errors: &mut Vec<E>,
) -> Option<Vec<Expr<G>>> {
    let mut out = Some(Vec::with_capacity(items.len()));
    for e in items {
        match (e.map_into(f, errors), &mut out) {
            (Some(mapped), Some(out)) => out.push(mapped),
            _ => out = None,
        }
    }
    out
}

/// The message of a condition without a positive test outside every `not`.
const NO_POSITIVE: &str = "has no positive test outside every `not` \
                           (a test such as `state.x` or `len(state.x) >= 1`)";

impl Expr<String> {
    /// The positive-test rule of [§16.3](docs/codons.md#s16-3): a condition must hold only on
    /// texts where some codon matched.
    ///
    /// It needs a positive test outside every `not` (see
    /// [`Expr::positive_fields`]); `not not state.a` has none, as [§16.3](docs/codons.md#s16-3)
    /// words it (`not` never cancels: write `state.a`). And it must be false
    /// when no codon matched (every field false, every count 0): the error
    /// then names the smallest part that makes it true, as in ``is true when
    /// no codon matched: `not state.b` holds on a text with no match`` for
    /// `state.a or not state.b`.
    pub fn check_positive(&self) -> Result<(), String> {
        if self.positive_fields().is_empty() {
            return Err(NO_POSITIVE.to_owned());
        }
        if self.holds_on_no_match() {
            return Err(format!(
                "is true when no codon matched: `{}` holds on a text with no match",
                self.no_match_culprit()
            ));
        }
        Ok(())
    }
}

impl<F: fmt::Display> fmt::Display for Expr<F> {
    /// The canonical text (see [`Expr`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Or(items) => write_joined(f, items, " or ", |_| false),
            Expr::And(items) => write_joined(f, items, " and ", |e| matches!(e, Expr::Or(_))),
            Expr::Not(inner) => {
                f.write_str("not ")?;
                write_operand(f, inner, matches!(**inner, Expr::Or(_) | Expr::And(_)))
            }
            Expr::Field { field, value: true } => write!(f, "state.{field}"),
            Expr::Field {
                field,
                value: false,
            } => write!(f, "state.{field} == False"),
            Expr::Count { field, cmp, n } => write!(f, "len(state.{field}) {} {n}", cmp.as_str()),
        }
    }
}

fn write_joined<F: fmt::Display>(
    f: &mut fmt::Formatter<'_>,
    items: &[Expr<F>],
    separator: &str,
    parens: impl Fn(&Expr<F>) -> bool,
) -> fmt::Result {
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(separator)?;
        }
        write_operand(f, e, parens(e))?;
    }
    Ok(())
}

fn write_operand<F: fmt::Display>(
    f: &mut fmt::Formatter<'_>,
    e: &Expr<F>,
    parens: bool,
) -> fmt::Result {
    if parens {
        write!(f, "({e})")
    } else {
        write!(f, "{e}")
    }
}

/// What a character starts: ASCII whitespace separates tokens, `(` and `)`
/// are tokens alone, and a maximal run of word characters (letters, digits,
/// `_`, `.`), of comparison characters (`=`, `!`, `<`, `>`) or of anything
/// else is one token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Space,
    Open,
    Close,
    Word,
    Op,
    Other,
}

fn class(c: char) -> Class {
    match c {
        '(' => Class::Open,
        ')' => Class::Close,
        '=' | '!' | '<' | '>' => Class::Op,
        '_' | '.' => Class::Word,
        c if c.is_ascii_whitespace() => Class::Space,
        c if c.is_alphanumeric() => Class::Word,
        _ => Class::Other,
    }
}

#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    class: Class,
    text: &'a str,
    start: usize,
}

impl Token<'_> {
    fn end(&self) -> usize {
        self.start + self.text.len()
    }

    fn is_word(&self, word: &str) -> bool {
        self.class == Class::Word && self.text == word
    }
}

fn tokenize(text: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        let kind = class(c);
        if kind == Class::Space {
            continue;
        }
        let mut end = start + c.len_utf8();
        if matches!(kind, Class::Word | Class::Op | Class::Other) {
            while let Some(&(i, d)) = chars.peek() {
                if class(d) != kind {
                    break;
                }
                end = i + d.len_utf8();
                chars.next();
            }
        }
        tokens.push(Token {
            class: kind,
            text: text.get(start..end).unwrap_or(""),
            start,
        });
    }
    tokens
}

/// At most this many characters of a token are quoted in a message.
const QUOTE_CHARS: usize = 32;

/// A token's text in backticks, for a message: cut after [`QUOTE_CHARS`]
/// characters, control and non-ASCII whitespace characters escaped.
fn quote(text: &str) -> String {
    let mut out = String::from("`");
    for (i, c) in text.chars().enumerate() {
        if i == QUOTE_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() || (c.is_whitespace() && c != ' ') {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out.push('`');
    out
}

/// What a message says was found: the token quoted, or `the end`.
fn found(token: Option<Token<'_>>) -> String {
    token.map_or_else(|| "the end".to_owned(), |t| quote(t.text))
}

fn at(offset: usize, message: impl fmt::Display) -> ConditionError {
    ConditionError {
        message: format!("at byte {offset}: {message}"),
        offset,
    }
}

const STATE: &str = "state.";

/// The field name of a `state.<field>` word, checked.
fn field_name(token: Token<'_>) -> Result<String, ConditionError> {
    let start = token.start + STATE.len();
    let name = token.text.strip_prefix(STATE).unwrap_or("");
    if name.is_empty() {
        return Err(at(
            start,
            "`state.` must be followed directly by a field name (no whitespace)",
        ));
    }
    let mut bytes = name.bytes();
    let valid = bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !valid {
        return Err(at(
            start,
            format_args!("field name {} must match [a-z][a-z0-9_]*", quote(name)),
        ));
    }
    Ok(name.to_owned())
}

/// ASCII digits as a `u32`; `None` when too large (or not digits).
fn parse_u32(digits: &str) -> Option<u32> {
    digits.bytes().try_fold(0u32, |n, b| {
        if !b.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u32::from(b - b'0'))
    })
}

/// The message of a comparison that is no comparison (`=`, `===`, `=>`…).
fn not_a_comparison(token: Token<'_>) -> ConditionError {
    at(
        token.start,
        format_args!(
            "{} is not a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`)",
            quote(token.text)
        ),
    )
}

const WHITESPACE_IN_LEN: &str = "no whitespace is allowed inside `len(state.<field>)`";

/// A recursive-descent parser with one token of lookahead; `depth` counts
/// the `not`s and `(`s open.
struct Parser<'a> {
    tokens: Vec<Token<'a>>,
    pos: usize,
    depth: usize,
    /// The condition's length: where "the end" is.
    end: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<Token<'a>> {
        self.tokens.get(self.pos).copied()
    }

    fn bump(&mut self) {
        self.pos += 1;
    }

    /// The offset of the next token, or of the end.
    fn offset(&self) -> usize {
        self.peek().map_or(self.end, |t| t.start)
    }

    fn next_is_word(&self, word: &str) -> bool {
        self.peek().is_some_and(|t| t.is_word(word))
    }

    /// `condition := term ("or" term)*`
    fn condition(&mut self) -> Result<Expr<String>, ConditionError> {
        let mut items = Vec::new();
        loop {
            match self.term()? {
                Expr::Or(inner) => items.extend(inner),
                e => items.push(e),
            }
            if !self.next_is_word("or") {
                return Ok(single_or(items, Expr::Or));
            }
            self.bump();
        }
    }

    /// `term := factor ("and" factor)*`
    fn term(&mut self) -> Result<Expr<String>, ConditionError> {
        let mut items = Vec::new();
        loop {
            match self.factor()? {
                Expr::And(inner) => items.extend(inner),
                e => items.push(e),
            }
            if !self.next_is_word("and") {
                return Ok(single_or(items, Expr::And));
            }
            self.bump();
        }
    }

    /// `factor := "not" factor | "(" condition ")" | test`
    fn factor(&mut self) -> Result<Expr<String>, ConditionError> {
        let Some(token) = self.peek() else {
            return Err(self.expected_factor());
        };
        match token.class {
            Class::Word if token.text == "not" => {
                self.enter(token)?;
                let inner = self.factor()?;
                self.depth = self.depth.saturating_sub(1);
                Ok(Expr::Not(Box::new(inner)))
            }
            Class::Open => {
                self.enter(token)?;
                let inner = self.condition()?;
                match self.peek() {
                    Some(t) if t.class == Class::Close => {
                        self.bump();
                        self.depth = self.depth.saturating_sub(1);
                        Ok(inner)
                    }
                    None => Err(at(token.start, "unbalanced parenthesis")),
                    Some(t) => Err(at(
                        t.start,
                        format_args!("expected `and`, `or` or `)`, found {}", quote(t.text)),
                    )),
                }
            }
            Class::Word if token.text == "len" => self.count_test(token),
            Class::Word if token.text.starts_with(STATE) => self.field_test(token),
            _ => Err(self.expected_factor()),
        }
    }

    /// Consumes a `not` or `(`, one level deeper.
    fn enter(&mut self, token: Token<'_>) -> Result<(), ConditionError> {
        if self.depth >= MAX_DEPTH {
            return Err(ConditionError {
                message: format!("nested more than {MAX_DEPTH} levels"),
                offset: token.start,
            });
        }
        self.depth += 1;
        self.bump();
        Ok(())
    }

    fn expected_factor(&self) -> ConditionError {
        at(
            self.offset(),
            format_args!(
                "expected `state.<field>`, `len(state.<field>)`, `not` or `(`, found {}",
                found(self.peek())
            ),
        )
    }

    /// `"state." FIELD [("==" | "is") ("True" | "False")]`
    fn field_test(&mut self, token: Token<'a>) -> Result<Expr<String>, ConditionError> {
        let field = field_name(token)?;
        self.bump();
        let keyword = match self.peek() {
            Some(t) if t.is_word("is") => "is",
            Some(t) if t.class == Class::Op && t.text == "==" => "==",
            Some(t) if t.class == Class::Op => {
                return Err(match Cmp::from_op(t.text) {
                    Some(cmp) => at(
                        t.start,
                        format_args!(
                            "`{op}` does not apply to `state.{field}`, which is true or false: \
                             write `== True`, `== False`, `is True` or `is False`, \
                             or compare a count as in `len(state.<field>) {op} 1`",
                            op = cmp.as_str()
                        ),
                    ),
                    None => not_a_comparison(t),
                });
            }
            _ => return Ok(Expr::Field { field, value: true }),
        };
        self.bump();
        let value = match self.peek() {
            Some(t) if t.is_word("True") => true,
            Some(t) if t.is_word("False") => false,
            next => {
                let hint = match next {
                    Some(t) if keyword == "==" && t.text.bytes().all(|b| b.is_ascii_digit()) => {
                        format!(
                            "; to compare a count, write `len(state.<field>) {keyword} {}`",
                            t.text
                        )
                    }
                    _ => String::new(),
                };
                return Err(at(
                    self.offset(),
                    format_args!("`{keyword}` takes `True` or `False`{hint}"),
                ));
            }
        };
        self.bump();
        Ok(Expr::Field { field, value })
    }

    /// `"len(state." MATCHES ")" CMP INTEGER`, no whitespace inside
    /// `len(state.<field>)`.
    fn count_test(&mut self, len: Token<'a>) -> Result<Expr<String>, ConditionError> {
        self.bump();
        let open = match self.peek() {
            Some(t) if t.class == Class::Open && t.start == len.end() => t,
            Some(t) if t.class == Class::Open => return Err(at(len.end(), WHITESPACE_IN_LEN)),
            next => {
                return Err(at(
                    self.offset(),
                    format_args!("expected `(` right after `len`, found {}", found(next)),
                ))
            }
        };
        self.bump();
        let inner = match self.peek() {
            Some(t) if t.class == Class::Word && t.text.starts_with(STATE) => t,
            next => {
                return Err(at(
                    self.offset(),
                    format_args!(
                        "expected `state.<field>` right after `len(`, found {}",
                        found(next)
                    ),
                ))
            }
        };
        if inner.start != open.end() {
            return Err(at(open.end(), WHITESPACE_IN_LEN));
        }
        let field = field_name(inner)?;
        self.bump();
        match self.peek() {
            Some(t) if t.class == Class::Close && t.start == inner.end() => {}
            Some(t) if t.class == Class::Close => return Err(at(inner.end(), WHITESPACE_IN_LEN)),
            next => {
                return Err(at(
                    self.offset(),
                    format_args!(
                        "expected `)` right after `len(state.{field}`, found {}",
                        found(next)
                    ),
                ))
            }
        }
        self.bump();
        let cmp = match self.peek() {
            Some(t) if t.class == Class::Op => Cmp::from_op(t.text),
            _ => None,
        };
        let Some(cmp) = cmp else {
            return Err(at(
                self.offset(),
                "`len(...)` needs a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`) and an integer",
            ));
        };
        self.bump();
        let n = match self.peek() {
            Some(t) if t.class == Class::Word && t.text.bytes().all(|b| b.is_ascii_digit()) => {
                parse_u32(t.text).ok_or_else(|| {
                    at(
                        t.start,
                        format_args!("integer {} is larger than {}", quote(t.text), u32::MAX),
                    )
                })?
            }
            next => {
                return Err(at(
                    self.offset(),
                    format_args!(
                        "expected a non-negative integer (digits only, no sign) after `{}`, \
                         found {}",
                        cmp.as_str(),
                        found(next)
                    ),
                ))
            }
        };
        self.bump();
        Ok(Expr::Count { field, cmp, n })
    }
}

/// The one item alone, else `build(items)`.
fn single_or(
    mut items: Vec<Expr<String>>,
    build: fn(Vec<Expr<String>>) -> Expr<String>,
) -> Expr<String> {
    if items.len() == 1 {
        if let Some(only) = items.pop() {
            return only;
        }
    }
    build(items)
}
