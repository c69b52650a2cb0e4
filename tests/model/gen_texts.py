# Generates texts for scripts/differential.sh: words (ASCII and other
# scripts) and PII-like tokens, hits and near misses, joined by separators.
# With a third argument `evasive`, a PII token is often written evasively
# ([§15](docs/evasion.md#s15)): other scripts' digits, full-width forms, joiners, soft hyphens,
# combining marks after digits; and (round 2) Unicode dashes, NUL and other
# format or control characters, marks after separators, parenthesized and
# dingbat digits, Cyrillic and Greek look-alike letters.
# usage: gen_texts.py SEED COUNT [evasive] > texts.jsonl
import random, json, sys
random.seed(int(sys.argv[1]))
evasive = len(sys.argv) > 3 and sys.argv[3] == "evasive"
LOOKALIKE = {"a": "\u0430", "e": "\u0435", "o": "\u043e", "p": "\u0440", "c": "\u0441", "x": "\u0445",
             "y": "\u0443", "i": "\u0456", "j": "\u0458", "s": "\u0455", "E": "\u0395", "O": "\u039f",
             "T": "\u0422", "M": "\u041c", "P": "\u03a1", "H": "\u041d", "X": "\u03a7"}
def evade2(s, how):
    if how == "dash":
        d = random.choice("\u2010\u2011\u2013\u2014\u2212")
        return s.replace("-", d) if "-" in s else s + d
    if how in ("parenthesized", "dingbat"):
        one, zero = (0x2474, "0") if how == "parenthesized" else (0x2776, "\u24ff")
        return "".join(zero if c == "0" else chr(one + int(c) - 1) if c.isascii() and c.isdigit() else c for c in s)
    if how == "look-alike":
        ks = [k for k, c in enumerate(s) if c in LOOKALIKE]
        if not ks:
            return s
        k = random.choice(ks)
        return s[:k] + LOOKALIKE[s[k]] + s[k + 1:]
    if how == "mark after separator":
        return "".join(c + "\u0301" if c in "- " else c for c in s)
    k = random.randint(0, len(s))
    return s[:k] + random.choice(["\x00", "\ufff9", "\x01", "\u0600", "\x7f"]) + s[k:]
def evade(s):
    how = random.choice(["fullwidth", "arabic", "devanagari", "zwj", "shy", "mark", "zwsp", "as is",
                         "dash", "parenthesized", "dingbat", "look-alike", "look-alike", "mark after separator", "control"])
    if how in ("dash", "parenthesized", "dingbat", "look-alike", "mark after separator", "control"):
        return evade2(s, how)
    if how == "fullwidth":
        return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s)
    if how in ("arabic", "devanagari"):
        zero = 0x660 if how == "arabic" else 0x966
        return "".join(chr(zero + int(c)) if c.isascii() and c.isdigit() else c for c in s)
    if how == "mark":
        return s + "\u0301"
    if how == "as is" or len(s) < 2:
        return s
    inv = {"zwj": "\u200d", "shy": "\u00ad", "zwsp": "\u200b"}[how]
    k = random.randint(1, len(s) - 1)
    return s[:k] + inv + s[k:]
words = ["alpha","Beta","ticket","Ticket","running","café","color","colour","SUP","042","singing","wing","ALPHA","hello","the","Überprüfung","café","会議","номер","δοκιμή","report","MRN","rx","EHR","ticket","call","mail","PROJ","ZEUS","TCK","ORD","SUP","CC","ip","host","x","q","ñ","ß","Kelvin","ſ"]
def pii():
    r = random.random()
    d = lambda n: "".join(random.choice("0123456789") for _ in range(n))
    opts = [
        lambda: f"{d(3)}-{d(2)}-{d(4)}",
        lambda: random.choice(["4111 1111 1111 1111","4111-1111-1111-1111","5500000000000004", d(16), f"{d(4)} {d(4)} {d(4)} {d(4)}"]),
        lambda: random.choice(["MRN","mrn","EHR","RX","Rx"]) + random.choice(["",":","-"]) + random.choice([""," ","  "]) + d(random.randint(4,11)),
        lambda: random.choice(["a","jane.doe","x_y+z","ops","A.B"]) + "@" + random.choice(["example","ex-ample","b"]) + "." + random.choice(["com","co.uk","org","c"]),
        lambda: random.choice(["","1","+1","+1 ","1-"]) + random.choice([f"({d(3)})", d(3)]) + random.choice(["","-","."," "]) + d(3) + random.choice(["","-","."," "]) + d(4),
        lambda: ".".join(str(random.randint(0,300)) for _ in range(random.choice([3,4,4,5]))),
        lambda: "PROJ-" + random.choice(["ZEUS","APOLLO","X"]) + "-" + d(random.randint(1,3)) + random.choice(["","X","x"]),
        lambda: "TCK-" + d(random.choice([5,6,6,7])),
        lambda: "SUP-" + random.choice(["QRV","AB","ABCD"]) + "-" + d(3),
        lambda: "CC-" + d(random.choice([3,4,5])),
        lambda: d(random.randint(1,12)),
    ]
    return random.choice(opts)()
seps = [" ", " ", ", ", "\n", "; ", " — ", "(", ")", ":", "-", "", "/"]
for i in range(int(sys.argv[2])):
    parts = []
    for _ in range(random.randint(0, 10)):
        tok = pii() if random.random() < 0.5 else random.choice(words)
        parts.append(evade(tok) if evasive and random.random() < 0.5 else tok)
        parts.append(random.choice(seps))
    print(json.dumps("".join(parts), ensure_ascii=False))
