# Differential run of `normalize: evasion` ([§15](docs/evasion.md#s15)) against the reference
# semantics on one corpus: which decisions change, and why. Fails when a
# decision changes on a text the evasion view left as it was (those must be
# identical), when a decision marked `normalized` has nothing to normalize,
# or when a text that the view certainly changes is not marked `normalized`.
#
# The model reads Unicode data from `unicodedata2` (the Unicode version of
# the Rust crates, 18.0; scripts/differential.sh installs it) or else the
# standard library's `unicodedata`. It has no script property and no UTS #39
# confusables table: a letter's script is the first word of its name
# (LATIN, CYRILLIC, GREEK, ...), and the look-alikes it knows are the
# LOOKALIKES below, copied from confusables.txt (the Rust unit test
# `the_model_s_lookalikes_are_the_crate_s` checks them against the engine).
# Texts whose words mix other scripts are only reported as possible changes.
# usage: evasion_diff.py PLAYBOOK TEXTS.jsonl NONE.jsonl EVASION.jsonl
import json, sys
from collections import Counter
try:
    import unicodedata2 as unicodedata
except ImportError:
    import unicodedata

DI = set([0xAD, 0x34F, 0x61C, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFEFF, 0xFFA0]
         + list(range(0x180B, 0x1810)) + list(range(0x200B, 0x2010)) + list(range(0x202A, 0x202F))
         + list(range(0x2060, 0x2070)) + list(range(0xFE00, 0xFE10)) + list(range(0xFFF0, 0xFFF9))
         + list(range(0x1BCA0, 0x1BCA4)) + list(range(0x1D173, 0x1D17B)))

# Cyrillic and Greek letters whose UTS #39 skeleton is one ASCII letter.
LOOKALIKES = {
    "\u0430": "a", "\u0435": "e", "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0445": "x",
    "\u0443": "y", "\u0456": "i", "\u0458": "j", "\u0455": "s", "\u04bb": "h", "\u0501": "d",
    "\u051b": "q", "\u051d": "w", "\u0410": "A", "\u0412": "B", "\u0415": "E", "\u041a": "K",
    "\u041c": "M", "\u041d": "H", "\u041e": "O", "\u0420": "P", "\u0421": "C", "\u0422": "T",
    "\u0425": "X", "\u03bf": "o", "\u03b1": "a", "\u03bd": "v", "\u03b9": "i", "\u03b3": "y",
    "\u03c1": "p", "\u03c5": "u", "\u0391": "A", "\u0392": "B", "\u0395": "E", "\u039a": "K",
    "\u039f": "O", "\u03a1": "P", "\u03a4": "T", "\u03a7": "X",
}

def is_word(c):
    """`\\w` of Rust's regex crate, nearly: letters, marks, Nd, Pc, joiners."""
    cat = unicodedata.category(c)
    return c.isalpha() or cat[0] == "M" or cat in ("Nd", "Pc") or c in "\u200c\u200d"

def script(c):
    """The letter's script by the first word of its name; None for others."""
    if not c.isalpha():
        return None
    word = unicodedata.name(c, "").split(" ")[0]
    # Han and kana write one language together (UTS #39's Jpan).
    return "CJK" if word in ("CJK", "HIRAGANA", "KATAKANA") else word

def is_numeric_digit(c):
    """Numeric_Type=Digit: digit() defined, decimal() not."""
    return unicodedata.digit(c, None) is not None and unicodedata.decimal(c, None) is None

def words(text):
    word = []
    for c in text:
        if is_word(c):
            word.append(c)
        else:
            if word:
                yield word
            word = []
    if word:
        yield word

def changes(text):
    """Kinds of characters the view certainly changes in `text`."""
    kinds = set()
    for c in text:
        o = ord(c)
        cat = unicodedata.category(c)
        if o in DI or 0xE0000 <= o <= 0xE0FFF:
            kinds.add("default-ignorable")
        elif cat == "Cf" or (cat == "Cc" and c not in "\t\n\r"):
            kinds.add("format or control")
        elif cat in ("Mn", "Me"):
            kinds.add("mark")
        elif cat == "Pd" and c != "-" or c == "\u2212":
            kinds.add("dash")
        elif is_numeric_digit(c):
            kinds.add("numeric digit")
        elif cat == "Nd" and o > 0x7F and unicodedata.normalize("NFKC", c) == c:
            kinds.add("non-ASCII digit")
        elif unicodedata.normalize("NFKC", c) != c:
            kinds.add("NFKC: " + unicodedata.name(c, "U+%04X" % o).split()[0].lower())
    # Steps 1 to 4 remove or keep every character of a word here: a word
    # with a known look-alike and a Latin letter mixes scripts.
    kept = "".join(c for c in text if ord(c) not in DI and (c in "\t\n\r" or unicodedata.category(c) not in ("Cf", "Cc", "Mn", "Me")))
    for w in words(kept):
        if any(c in LOOKALIKES for c in w) and any(script(c) == "LATIN" for c in w):
            kinds.add("look-alike in a word that mixes scripts")
    return kinds

def why(text):
    """The kinds of characters the view may change in `text`."""
    kinds = changes(text)
    prev_digit = False
    for c in text:
        if unicodedata.category(c).startswith("M") and prev_digit:
            kinds.add("mark after digit")
        prev_digit = unicodedata.category(c) == "Nd" or is_numeric_digit(c)
    if unicodedata.normalize("NFKC", text) != text and not kinds:
        kinds.add("NFKC: composition")
    # Words that mix scripts may hold a look-alike the model does not know.
    for w in words(unicodedata.normalize("NFKC", text)):
        if len({s for s in map(script, w) if s}) > 1:
            kinds.add("word that mixes scripts")
    return kinds

def main():
    pb, texts, none, ev = sys.argv[1:5]
    texts = [json.loads(l) for l in open(texts, encoding="utf-8")]
    none = [json.loads(l) for l in open(none, encoding="utf-8")]
    ev = [json.loads(l) for l in open(ev, encoding="utf-8")]
    assert len(texts) == len(none) == len(ev), "line counts differ"
    keys = ("action", "clean_text", "triggers")
    normalized = changed = 0
    reasons, moves, errors = Counter(), Counter(), []
    fewer = 0
    for i, (t, a, b) in enumerate(zip(texts, none, ev)):
        differs = any(a.get(k) != b.get(k) for k in keys)
        if b.get("normalized"):
            normalized += 1
            if not why(t):
                errors.append(f"line {i + 1}: normalized but nothing to normalize")
        else:
            if differs or a.get("receipt_hash") != b.get("receipt_hash"):
                errors.append(f"line {i + 1}: decision changed on a text the view left alone")
            certain = changes(t)
            if certain:
                errors.append(f"line {i + 1}: not normalized, but the view changes it ({', '.join(sorted(certain))})")
        if differs:
            changed += 1
            for k in why(t):
                reasons[k] += 1
            moves[f"{a['action']} -> {b['action']}"] += 1
            ids = lambda d: {t["rule_id"] for t in d.get("triggers", [])}
            if not ids(a) <= ids(b):
                # A joiner or mark that split a word from a value no longer
                # does: the view matches what a reader sees.
                fewer += 1
    print(f"{pb}: {len(texts)} texts, {normalized} normalized, {changed} decisions changed")
    for k, n in reasons.most_common():
        print(f"  why: {k}: {n}")
    if changed:
        print(f"  rules that matched as written but not in the view: {fewer} texts")
    for k, n in moves.most_common(6):
        print(f"  change: {k}: {n}")
    if len(moves) > 6:
        print(f"  change: {len(moves) - 6} other kinds: {sum(n for _, n in moves.most_common()[6:])}")
    for e in errors[:20]:
        print("  ERROR " + e)
    sys.exit(1 if errors else 0)

main()
