# Differential run of `normalize: evasion` (SPEC §15) against the reference
# semantics on one corpus: which decisions change, and why. Fails when a
# decision changes on a text the evasion view left as it was (those must be
# identical), or when a decision marked `normalized` has nothing to normalize.
# usage: evasion_diff.py PLAYBOOK TEXTS.jsonl NONE.jsonl EVASION.jsonl
import json, sys, unicodedata
from collections import Counter

DI = set([0xAD, 0x34F, 0x61C, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFEFF, 0xFFA0]
         + list(range(0x180B, 0x1810)) + list(range(0x200B, 0x2010)) + list(range(0x202A, 0x202F))
         + list(range(0x2060, 0x2070)) + list(range(0xFE00, 0xFE10)) + list(range(0xFFF0, 0xFFF9))
         + list(range(0x1BCA0, 0x1BCA4)) + list(range(0x1D173, 0x1D17B)))

def why(text):
    """The kinds of characters the view changes in `text`."""
    kinds = set()
    prev_digit = False
    for c in text:
        o = ord(c)
        if o in DI or 0xE0000 <= o <= 0xE0FFF:
            kinds.add("default-ignorable")
        elif unicodedata.category(c).startswith("M") and prev_digit:
            kinds.add("mark after digit")
        elif unicodedata.category(c) == "Nd" and o > 0x7F and unicodedata.normalize("NFKC", c) == c:
            kinds.add("non-ASCII digit")
        elif unicodedata.normalize("NFKC", c) != c:
            kinds.add("NFKC: " + unicodedata.name(c, "U+%04X" % o).split()[0].lower())
        prev_digit = c.isdigit() and unicodedata.category(c) == "Nd"
    if unicodedata.normalize("NFKC", text) != text and not kinds:
        kinds.add("NFKC: composition")
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
        elif differs or a.get("receipt_hash") != b.get("receipt_hash"):
            errors.append(f"line {i + 1}: decision changed on a text the view left alone")
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
