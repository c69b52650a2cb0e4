"""Labelled texts for scripts/detection-bench.py: valid identifiers made with
python-stdnum's check-digit functions (or the published algorithm where
stdnum has none), one-character near misses, look-alikes, and FAKE
credentials drawn at random in the right alphabet (never real keys). Every
text is placed in prose, JSON, YAML, shell and code, with or without the
context words the packs need. Deterministic for a given seed."""
import base64
import datetime
import json
import re
import string

from stdnum import iban as s_iban, luhn, verhoeff
from stdnum.de import idnr, vat as de_vat
from stdnum.es import cif, dni, nie, nif
from stdnum.fr import nir, tva
from stdnum.gb import nhs
from stdnum.in_ import aadhaar, gstin, pan
from stdnum.it import codicefiscale, iva
from stdnum.iso7064 import mod_11_10
from stdnum.jp import in_ as jp_in
from stdnum.kr import rrn
from stdnum.nl import bsn, btw
from stdnum.pl import nip, pesel
from stdnum.au import tfn
from stdnum.at import uid as at_uid
from stdnum.be import vat as be_vat
from stdnum.dk import cvr as dk_cvr
from stdnum.fi import alv as fi_alv
from stdnum.lu import tva as lu_tva
from stdnum.pt import nif as pt_nif
from stdnum.se import vat as se_vat
from stdnum.us import itin, rtn, ssn

D = string.digits
U = string.ascii_uppercase
L = string.ascii_lowercase
AN = U + L + D
B64 = AN + "+/"
URLSAFE = AN + "_-"
HEX = "0123456789abcdef"


def rd(r, n, alphabet=D):
    return "".join(r.choice(alphabet) for _ in range(n))


def flip(r, v, positions, alphabet=D):
    """Change one character (at one of `positions`) to another of `alphabet`."""
    i = r.choice(positions)
    c = r.choice([a for a in alphabet if a != v[i]])
    return v[:i] + c + v[i + 1:]


def near(r, v, valid, positions, alphabet=D):
    """A one-character change of v that `valid` rejects."""
    for _ in range(200):
        w = flip(r, v, positions, alphabet)
        if not valid(w):
            return w
    raise RuntimeError(f"no near miss for {v}")


# ---------------------------------------------------------------- US
def g_ssn(r):
    while True:
        area = r.choice([r.randint(1, 665), r.randint(667, 899)])
        v = f"{area:03d}{r.randint(1, 99):02d}{r.randint(1, 9999):04d}"
        if ssn.is_valid(v):
            return v


def n_ssn(r, v):
    # No check digit: a near miss is a number SSA never issues (area 000 or
    # 666, group 00, serial 0000), each a change of one field.
    k = r.randrange(4)
    if k == 0:
        return "666" + v[3:]
    if k == 1:
        return "000" + v[3:]
    if k == 2:
        return v[:3] + "00" + v[5:]
    return v[:5] + "0000"


def f_ssn(r, v, ctx):
    forms = [f"{v[:3]}-{v[3:5]}-{v[5:]}", f"{v[:3]}-{v[3:5]}-{v[5:]}", f"{v[:3]} {v[3:5]} {v[5:]}"]
    if ctx:
        forms.append(v)  # bare nine digits: the pack takes them near "SSN"
    return r.choice(forms)


ITIN_GROUPS = list(range(50, 66)) + list(range(70, 89)) + [90, 91, 92] + list(range(94, 100))


def g_itin(r):
    while True:
        v = f"9{r.randint(0, 99):02d}{r.choice(ITIN_GROUPS):02d}{r.randint(0, 9999):04d}"
        if itin.is_valid(v):
            return v


def n_itin(r, v):
    return v[:3] + r.choice(["93", "89", "66", "49"]) + v[5:]


def f_dash_3_2_4(r, v, ctx):
    return r.choice([f"{v[:3]}-{v[3:5]}-{v[5:]}", f"{v[:3]}-{v[3:5]}-{v[5:]}", f"{v[:3]} {v[3:5]} {v[5:]}"])


def g_card(r):
    kind = r.randrange(5)
    if kind == 0:
        body = "4" + rd(r, 14)
    elif kind == 1:
        body = str(r.randint(51, 55)) + rd(r, 13)
    elif kind == 2:
        body = str(r.randint(2221, 2720)) + rd(r, 11)
    elif kind == 3:
        body = r.choice(["34", "37"]) + rd(r, 12)
    else:
        body = "6011" + rd(r, 11)
    return body + luhn.calc_check_digit(body)


def n_luhn_last(r, v):
    return near(r, v, luhn.is_valid, [len(v) - 1])


def f_card(r, v, ctx):
    if len(v) == 15:
        return r.choice([v, f"{v[:4]} {v[4:10]} {v[10:]}", f"{v[:4]}-{v[4:10]}-{v[10:]}"])
    g = [v[i:i + 4] for i in range(0, 16, 4)]
    return r.choice([v, " ".join(g), "-".join(g)])


ABA_PREFIX = [f"{i:02d}" for i in list(range(1, 13)) + list(range(21, 33)) + list(range(61, 73)) + [80]]


def g_aba(r):
    body = r.choice(ABA_PREFIX) + rd(r, 6)
    return body + rtn.calc_check_digit(body)


def n_aba(r, v):
    return near(r, v, rtn.is_valid, [8])


def g_npi(r):
    body = r.choice("12") + rd(r, 8)
    return body + luhn.calc_check_digit("80840" + body)


def n_npi(r, v):
    return near(r, v, lambda w: luhn.is_valid("80840" + w), [9])


def g_passport(r):
    return rd(r, 9) if r.random() < 0.5 else r.choice(U) + rd(r, 8)


def n_passport(r, v):
    # No check digit: a near miss is one digit short.
    return v[:-1]


def f_plain(r, v, ctx):
    return v


# ---------------------------------------------------------------- EU
IBAN_CC = {"DE": "18!n", "GB": "4!a14!n", "NL": "4!a10!n", "FR": "5!n5!n11!n2!n", "ES": "20!n",
           "IT": "1!a5!n5!n12!n", "PL": "24!n", "AT": "16!n", "IE": "4!a14!n", "CH": "5!n12!n"}


def g_iban(r):
    import re
    while True:
        cc = r.choice(sorted(IBAN_CC))
        bban = ""
        for n, k in re.findall(r"([0-9]+)!([nac])", IBAN_CC[cc]):
            bban += rd(r, int(n), {"n": D, "a": U, "c": D + U}[k])
        v = cc + s_iban.calc_check_digits(cc + "00" + bban) + bban
        if s_iban.is_valid(v):
            return v


def n_iban(r, v):
    pos = [i for i in range(4, len(v)) if v[i].isdigit()]
    return near(r, v, lambda w: s_iban.is_valid(w, check_country=False), pos)


def f_iban(r, v, ctx):
    return r.choice([v, " ".join(v[i:i + 4] for i in range(0, len(v), 4))])


def g_nhs(r):
    while True:
        v = rd(r, 10)
        if nhs.is_valid(v):
            return v


def n_nhs(r, v):
    return near(r, v, nhs.is_valid, [9])


def f_nhs(r, v, ctx):
    return r.choice([f"{v[:3]} {v[3:6]} {v[6:]}", v, f"{v[:3]}-{v[3:6]}-{v[6:]}"])


NINO_FIRST = "ABCEGHJKLMNOPRSTWXYZ"
NINO_SECOND = "ABCEGHJKLMNPRSTWXYZ"


def g_nino(r):
    while True:
        p = r.choice(NINO_FIRST) + r.choice(NINO_SECOND)
        if p not in ("BG", "GB", "KN", "NK", "NT", "TN", "ZZ"):
            return p + rd(r, 6) + r.choice("ABCD")


def n_nino(r, v):
    # No check digit: a near miss has a letter HMRC never allocates.
    return r.choice([r.choice("DFIQUV") + v[1:], v[:8] + r.choice("EFXZ")])


def f_nino(r, v, ctx):
    return r.choice([v, f"{v[:2]} {v[2:4]} {v[4:6]} {v[6:8]} {v[8]}"])


def g_idnr(r):
    while True:
        digits = list(D)
        r.shuffle(digits)
        times = r.choice([2, 3])
        body = digits[:11 - times]
        body += [body[0]] * (times - 1)
        r.shuffle(body)
        body = "".join(body)
        if body[0] != "0":
            v = body + mod_11_10.calc_check_digit(body)
            if idnr.is_valid(v):
                return v


def n_idnr(r, v):
    return near(r, v, mod_11_10.is_valid, [10])


def f_idnr(r, v, ctx):
    return r.choice([v, f"{v[:2]} {v[2:5]} {v[5:8]} {v[8:]}"])


def g_es_nif(r):
    k = r.random()
    if k < 0.6:
        b = rd(r, 8)
        return b + dni.calc_check_digit(b)
    b = r.choice("XYZ") + rd(r, 7)
    return b + nie.calc_check_digit(b)


def n_es_nif(r, v):
    return near(r, v, nif.is_valid, [8], U)


def f_es_nif(r, v, ctx):
    return r.choice([v, v, v[:-1] + "-" + v[-1]])


CONS = "BCDFGHJKLMNPQRSTVWXZ"
VOW = "AEIOU"


def cf_triple(r):
    # As the code is made from a name: consonants first, then vowels, then X.
    k = r.random()
    if k < 0.75:
        return rd(r, 3, CONS)
    if k < 0.9:
        return rd(r, 2, CONS) + r.choice(VOW)
    if k < 0.97:
        return r.choice(CONS) + rd(r, 2, VOW)
    return r.choice(CONS) + r.choice(VOW) + "X"


def g_cf(r):
    # Surname and name triples, year, month letter, day (+40 for women),
    # a Belfiore place code (A-M, or Z abroad), then the check letter.
    body = cf_triple(r) + cf_triple(r) + rd(r, 2) + r.choice("ABCDEHLMPRST") \
        + f"{r.randint(1, 28) + r.choice([0, 40]):02d}" + r.choice("ABCDEFGHILMZ") + f"{r.randint(1, 999):03d}"
    return body + codicefiscale.calc_check_digit(body)


def n_cf(r, v):
    return near(r, v, codicefiscale.is_valid, [15], U)


def g_nir(r):
    dept = r.choice(["2A", "2B"]) if r.random() < 0.1 else f"{r.randint(1, 95):02d}"
    body = r.choice("12") + rd(r, 2) + f"{r.randint(1, 12):02d}" + dept + rd(r, 6)
    return body + nir.calc_check_digits(body)


def n_nir(r, v):
    return near(r, v, nir.is_valid, [13, 14])


def f_nir(r, v, ctx):
    return r.choice([v, f"{v[0]} {v[1:3]} {v[3:5]} {v[5:7]} {v[7:10]} {v[10:13]} {v[13:]}"])


def g_bsn(r):
    while True:
        v = rd(r, 9)
        if bsn.is_valid(v) and v[0] != "0":
            return v


def n_bsn(r, v):
    return near(r, v, bsn.is_valid, [8])


def f_bsn(r, v, ctx):
    return r.choice([v, v, f"{v[:4]}.{v[4:6]}.{v[6:]}"])


def g_pesel(r):
    d = datetime.date.fromordinal(r.randint(datetime.date(1940, 1, 1).toordinal(),
                                            datetime.date(2015, 12, 31).toordinal()))
    month = d.month + (20 if d.year >= 2000 else 0)
    body = f"{d.year % 100:02d}{month:02d}{d.day:02d}" + rd(r, 4)
    return body + pesel.calc_check_digit(body)


def n_pesel(r, v):
    return near(r, v, lambda w: pesel.calc_check_digit(w[:-1]) == w[-1], [10])


def g_vat_de(r):
    body = str(r.randint(1, 9)) + rd(r, 7)
    return "DE" + body + mod_11_10.calc_check_digit(body)


def g_vat_it(r):
    while True:
        office = r.choice([f"{r.randint(1, 100):03d}", "120", "121"])
        body = f"{r.randint(1, 9999999):07d}" + office
        v = body + luhn.calc_check_digit(body)
        if iva.is_valid(v):
            return "IT" + v


def g_prefixed(prefix, valid, make):
    """Values of `make` until `valid` takes one, after `prefix`."""
    def g(r):
        while True:
            v = make(r)
            if valid(v):
                return prefix + v
    return g


g_vat_pl = g_prefixed("PL", nip.is_valid, lambda r: rd(r, 10))


def g_vat_nl(r):
    while True:
        v = "NL" + g_bsn(r) + "B" + f"{r.randint(1, 99):02d}"
        if btw.is_valid(v):
            return v


def g_vat_es(r):
    b = rd(r, 8)
    return "ES" + b + dni.calc_check_digit(b)


def g_vat_fr(r):
    """FR, a key (numeric for most, a letter key sometimes) and a SIREN."""
    while True:
        body = rd(r, 8)
        siren = body + luhn.calc_check_digit(body)
        if r.random() < 0.8:
            return "FR" + f"{int(siren + '12') % 97:02d}" + siren
        v = "FR" + r.choice("0123456789ABCDEFGHJKLMNPQRSTUVWXYZ") + r.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") + siren
        if tva.is_valid(v):
            return v


def g_cif(r):
    body = r.choice("ABCDEFGHJNPQRSUVW") + rd(r, 7)
    return body + cif.calc_check_digits(body)[r.randint(0, 1)]


def g_vat_es_cif(r):
    return "ES" + g_cif(r)


def g_vat_at(r):
    body = "U" + rd(r, 7)
    return "AT" + body + at_uid.calc_check_digit(body)


def g_vat_be(r):
    body = r.choice("01") + rd(r, 7)
    if int(body) == 0:
        body = "01234567"
    return "BE" + body + f"{97 - int(body) % 97:02d}"


def g_vat_pt(r):
    body = str(r.randint(1, 9)) + rd(r, 7)
    return "PT" + body + pt_nif.calc_check_digit(body)


def g_vat_lu(r):
    body = rd(r, 6)
    return "LU" + body + lu_tva.calc_check_digits(body)


g_vat_dk = g_prefixed("DK", dk_cvr.is_valid, lambda r: str(r.randint(1, 9)) + rd(r, 7))
g_vat_fi = g_prefixed("FI", fi_alv.is_valid, lambda r: rd(r, 8))


def g_vat_se(r):
    body = rd(r, 9)
    return "SE" + body + luhn.calc_check_digit(body) + "01"


def n_vat(valid, pos_from_end=1, alphabet=D):
    def f(r, v):
        return near(r, v, valid, [len(v) - pos_from_end], alphabet)
    return f


def f_vat(r, v, ctx):
    return r.choice([v, v, v[:2] + " " + v[2:]])


# ---------------------------------------------------------------- IN
def g_aadhaar(r):
    while True:
        body = str(r.randint(2, 9)) + rd(r, 10)
        v = body + verhoeff.calc_check_digit(body)
        if aadhaar.is_valid(v):
            return v


def n_aadhaar(r, v):
    return near(r, v, verhoeff.is_valid, [11])


def f_aadhaar(r, v, ctx):
    # A quarter written as twelve bare digits: the pack leaves them out by
    # design (pii_in.yaml header), so they count as misses.
    return r.choice([f"{v[:4]} {v[4:8]} {v[8:]}", f"{v[:4]} {v[4:8]} {v[8:]}",
                     f"{v[:4]}-{v[4:8]}-{v[8:]}", v])


def g_pan(r):
    return rd(r, 3, U) + r.choice("ABCFGHLJPTK") + r.choice(U) + f"{r.randint(1, 9999):04d}" + r.choice(U)


def n_pan(r, v):
    # No check digit: a near miss has a holder type that does not exist.
    return v[:3] + r.choice("DEIMNOQRSUVWXYZ") + v[4:]


def g_gstin(r):
    body = f"{r.randint(1, 37):02d}" + g_pan(r) + r.choice(D[1:] + U) + "Z"
    return body + luhn.calc_check_digit(body, D + U)  # stdnum.in_.gstin's mod-36 check


def n_gstin(r, v):
    return near(r, v, gstin.is_valid, [14], D + U)


# ---------------------------------------------------------------- APAC
def g_tfn(r):
    while True:
        v = rd(r, 9)
        if tfn.is_valid(v) and v[0] != "0":
            return v


def n_tfn(r, v):
    return near(r, v, tfn.is_valid, [8])


def f_3_3_3(r, v, ctx):
    return r.choice([v, f"{v[:3]} {v[3:6]} {v[6:]}"])


def medicare_ok(v):
    return (len(v) == 10 and v.isdigit() and v[0] in "23456"
            and sum(w * int(d) for w, d in zip([1, 3, 7, 9, 1, 3, 7, 9], v)) % 10 == int(v[8]))


def g_medicare(r):
    body = str(r.randint(2, 6)) + rd(r, 7)
    check = sum(w * int(d) for w, d in zip([1, 3, 7, 9, 1, 3, 7, 9], body)) % 10
    return body + str(check) + str(r.randint(1, 9))


def n_medicare(r, v):
    return near(r, v, medicare_ok, [8])


def f_medicare(r, v, ctx):
    return r.choice([v, f"{v[:4]} {v[4:9]} {v[9]}"])


def nric_ok(v):
    if len(v) != 9 or v[0] not in "STFG" or not v[1:8].isdigit():
        return False
    s = sum(w * int(d) for w, d in zip([2, 7, 6, 5, 4, 3, 2], v[1:8])) + (4 if v[0] in "TG" else 0)
    return ("JZIHGFEDCBA" if v[0] in "ST" else "XWUTRQPNMLK")[s % 11] == v[8]


def g_nric(r):
    p = r.choice("STFG")
    body = rd(r, 7)
    s = sum(w * int(d) for w, d in zip([2, 7, 6, 5, 4, 3, 2], body)) + (4 if p in "TG" else 0)
    return p + body + ("JZIHGFEDCBA" if p in "ST" else "XWUTRQPNMLK")[s % 11]


def n_nric(r, v):
    return near(r, v, nric_ok, [8], U)


def g_rrn(r):
    while True:
        d = datetime.date.fromordinal(r.randint(datetime.date(1940, 1, 1).toordinal(),
                                                datetime.date(2015, 12, 31).toordinal()))
        century = r.choice("12" if d.year < 2000 else "34")
        body = d.strftime("%y%m%d") + century + f"{r.randint(0, 96):02d}" + rd(r, 3)
        v = body + rrn.calc_check_digit(body)
        if rrn.is_valid(v):
            return v


def n_rrn(r, v):
    return near(r, v, lambda w: rrn.calc_check_digit(w[:-1]) == w[-1], [12])


def f_rrn(r, v, ctx):
    forms = [f"{v[:6]}-{v[6:]}", f"{v[:6]}-{v[6:]}"]
    if ctx:
        forms.append(v)
    return r.choice(forms)


def g_mynumber(r):
    body = rd(r, 11)
    return body + jp_in.calc_check_digit(body)


def n_mynumber(r, v):
    return near(r, v, jp_in.is_valid, [11])


def f_4_4_4(r, v, ctx):
    return r.choice([v, f"{v[:4]} {v[4:8]} {v[8:]}", f"{v[:4]}-{v[4:8]}-{v[8:]}"])


# ---------------------------------------------------------------- credentials (FAKE)
def fake_in(r, alphabet, n):
    """A random string of n characters of `alphabet`; starts with FAKE when
    the alphabet takes it, so that no value can be mistaken for a real key."""
    s = rd(r, n, alphabet)
    if n > 12 and all(c in alphabet for c in "FAKE"):
        s = "FAKE" + s[4:]
    return s


def b64url(obj):
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")


CRED = {}


def cred(kind, group, gen, near_miss, name, forms=None, needs_name=False):
    CRED[kind] = dict(group=group, gen=gen, near=near_miss, name=name, needs_name=needs_name)


cred("AWS_ACCESS_KEY_ID", "cloud", lambda r: r.choice(["AKIA", "ASIA"]) + fake_in(r, U + "234567", 16),
     lambda r, v: v[:-1], "AWS_ACCESS_KEY_ID")
cred("AWS_SECRET_ACCESS_KEY", "cloud", lambda r: rd(r, 40, B64),
     lambda r, v: v[:-1], "AWS_SECRET_ACCESS_KEY", needs_name=True)
cred("GCP_API_KEY", "cloud", lambda r: "AIza" + fake_in(r, URLSAFE, 34) + r.choice(AN),
     lambda r, v: v[:-1], "GOOGLE_API_KEY")
cred("AZURE_STORAGE_CONNECTION_STRING", "cloud",
     lambda r: f"DefaultEndpointsProtocol=https;AccountName=fake{rd(r, 8, L + D)};AccountKey={rd(r, 86, B64)}==;EndpointSuffix=core.windows.net",
     lambda r, v: v[:v.index("AccountKey=") + 11] + v[v.index("AccountKey=") + 12:],  # key one short
     "AZURE_STORAGE_CONNECTION_STRING")
cred("GITHUB_PAT", "source hosting", lambda r: "ghp_" + fake_in(r, AN, 36), lambda r, v: v[:-1], "GITHUB_TOKEN")
cred("GITHUB_FINE_GRAINED_PAT", "source hosting",
     lambda r: "github_pat_" + fake_in(r, AN, 22) + "_" + rd(r, 59, AN), lambda r, v: v[:-1], "GITHUB_TOKEN")
cred("GITHUB_OAUTH_TOKEN", "source hosting", lambda r: "gho_" + fake_in(r, AN, 36), lambda r, v: v[:-1], "GH_OAUTH_TOKEN")
cred("GITHUB_APP_TOKEN", "source hosting", lambda r: r.choice(["ghs_", "ghu_", "ghr_"]) + fake_in(r, AN, 36),
     lambda r, v: v[:-1], "GH_APP_TOKEN")
cred("GITLAB_PAT", "source hosting", lambda r: "glpat-" + fake_in(r, AN, 20), lambda r, v: v[:-2], "GITLAB_TOKEN")
cred("SLACK_TOKEN", "chat",
     lambda r: "xox" + r.choice("bp") + "-" + rd(r, 12) + "-" + rd(r, 12) + "-" + fake_in(r, AN, 24),
     lambda r, v: "xoxq" + v[4:], "SLACK_BOT_TOKEN")
cred("SLACK_WEBHOOK_URL", "chat",
     lambda r: f"https://hooks.slack.com/services/T{rd(r, 9, U + D)}/B{rd(r, 9, U + D)}/{fake_in(r, AN, 24)}",
     lambda r, v: v.rsplit("/", 1)[0] + "/" + v.rsplit("/", 1)[1][:12], "SLACK_WEBHOOK_URL")
cred("STRIPE_SECRET_KEY", "payment", lambda r: "sk_live_" + fake_in(r, AN, r.choice([24, 99])),
     lambda r, v: "sk_test_" + v[8:], "STRIPE_SECRET_KEY")
cred("STRIPE_RESTRICTED_KEY", "payment", lambda r: "rk_live_" + fake_in(r, AN, r.choice([24, 99])),
     lambda r, v: "pk_live_" + v[8:], "STRIPE_RESTRICTED_KEY")
cred("OPENAI_API_KEY", "AI provider",
     lambda r: r.choice([lambda: "sk-proj-" + fake_in(r, URLSAFE, 120) + r.choice(AN),
                         lambda: "sk-" + fake_in(r, AN, 20) + "T3BlbkFJ" + rd(r, 20, AN)])(),
     lambda r, v: v[:30], "OPENAI_API_KEY")
cred("ANTHROPIC_API_KEY", "AI provider", lambda r: "sk-ant-api03-" + fake_in(r, URLSAFE, 93) + "AA",
     lambda r, v: v[:-2] + "ZZ", "ANTHROPIC_API_KEY")
cred("HUGGINGFACE_TOKEN", "AI provider", lambda r: "hf_" + fake_in(r, AN, 34), lambda r, v: v[:-1], "HF_TOKEN")
cred("NPM_TOKEN", "package registry", lambda r: "npm_" + fake_in(r, AN, 36), lambda r, v: v[:-1], "NPM_TOKEN")
cred("PYPI_TOKEN", "package registry", lambda r: "pypi-AgEIcHlwaS5vcmc" + fake_in(r, URLSAFE, 150) + r.choice(AN),
     lambda r, v: "pypi-AgENdGVzdC5weXBpLm9yZw" + v[20:], "PYPI_TOKEN")
cred("SENDGRID_API_KEY", "messaging", lambda r: "SG." + fake_in(r, URLSAFE, 22) + "." + rd(r, 42, URLSAFE) + r.choice(AN),
     lambda r, v: v[:-1], "SENDGRID_API_KEY")
cred("TWILIO_API_KEY", "messaging", lambda r: "SK" + rd(r, 32, HEX), lambda r, v: v[:-1], "TWILIO_API_KEY")


def pem(r):
    kind = r.choice(["RSA ", "EC ", "OPENSSH ", ""])
    body = "\n".join(rd(r, 64, B64) for _ in range(r.randint(4, 8)))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"


cred("PRIVATE_KEY_PEM", "private key", pem,
     lambda r, v: v.replace("PRIVATE KEY", "PUBLIC KEY").replace("RSA ", "").replace("EC ", "").replace("OPENSSH ", ""),
     "PRIVATE_KEY")
cred("JWT", "JWT",
     lambda r: b64url({"alg": "HS256", "typ": "JWT"}) + "." +
     b64url({"sub": rd(r, 8), "name": "FAKE " + rd(r, 6, L), "iat": r.randint(1600000000, 1800000000)}) + "." +
     rd(r, 43, URLSAFE[:-1]),
     lambda r, v: v.rsplit(".", 1)[0], "ID_TOKEN")
cred("TWILIO_ACCOUNT_SID", "Twilio account SID", lambda r: "AC" + rd(r, 32, HEX),
     lambda r, v: "AC" + v[2:].upper(), "TWILIO_ACCOUNT_SID")


def url_cred(r):
    return (r.choice(["postgres", "mysql", "redis", "amqp", "https"]) + "://" + r.choice(["app", "svc", "admin", "deploy"])
            + ":" + fake_in(r, AN, r.randint(12, 24)) + "@" + r.choice(["db", "cache", "mq", "api"]) + ".internal.example:5432/app")


def url_span(v):
    a = v.index("://") + 3
    a = v.index(":", a) + 1
    return a, v.index("@", a)


cred("URL_CREDENTIALS", "URL credential", url_cred,
     lambda r, v: v[:url_span(v)[0]] + r.choice(["${DB_PASSWORD}", "<password>", "****"]) + v[url_span(v)[1]:],
     "DATABASE_URL")
cred("SECRET_ASSIGNMENT", "secret assignment", lambda r: fake_in(r, AN + "!#%^", r.randint(12, 24)),
     lambda r, v: r.choice(["changeme123", "<redacted>", "${DB_PASSWORD}", "your_api_key_here", "********", "Ab1!"]),
     "DB_PASSWORD", needs_name=True)


# ---------------------------------------------------------------- look-alikes
def lookalike(r, digits):
    """A value that looks like an identifier and is not one: UUIDs, hashes,
    order numbers, dates, phone numbers, version strings, random digit runs
    of the identifier's length."""
    k = r.randrange(9)
    if k == 0:
        h = rd(r, 32, HEX)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{r.choice('89ab')}{h[17:20]}-{h[20:]}", "request_id", "request id"
    if k == 1:
        return rd(r, r.choice([32, 40, 64]), HEX), "commit_sha", "the commit hash is"
    if k == 2:
        return f"ORD-{r.randint(2019, 2025)}-{rd(r, 6)}", "order_id", "order number"
    if k == 3:
        return rd(r, digits), "order_id", "order number"
    if k == 4:
        d = datetime.date(2024, 1, 1) + datetime.timedelta(days=r.randint(0, 700))
        return r.choice([d.isoformat(), d.strftime("%d/%m/%Y"), d.strftime("%m-%d-%Y")]), "created", "created on"
    if k == 5:
        return r.choice([f"+1 ({rd(r, 3)}) {rd(r, 3)}-{rd(r, 4)}", f"+44 20 {rd(r, 4)} {rd(r, 4)}",
                         f"+91 {rd(r, 5)} {rd(r, 5)}", f"{rd(r, 3)}-{rd(r, 3)}-{rd(r, 4)}"]), "phone", "call me on"
    if k == 6:
        return f"{r.randint(0, 9)}.{r.randint(0, 40)}.{r.randint(0, 200)}", "version", "version"
    if k == 7:
        return rd(r, 64, B64).rstrip("+/") + "==", "checksum_b64", "the digest is"
    return " ".join(rd(r, 4) for _ in range(r.randint(2, 4))), "tracking", "tracking number"


# ---------------------------------------------------------------- placement
FORMATS = ["prose", "json", "yaml", "shell", "code"]


def place(fmt, value, key, phrase):
    """Text and (start, end) of value in it. `key` is a snake_case name
    (camelCase in code), the phrase the prose words before the value."""
    if fmt == "prose":
        pre = f"Hi team, {phrase} {value}"
        return pre + " - please update the record before Friday.", len(pre) - len(value)
    if fmt == "json":
        pre = '{"customer": "A. Example", "' + key + '": "' + value.replace("\n", "\\n")
        text = pre + '", "status": "active"}'
        return text, len(pre) - len(value.replace("\n", "\\n"))
    if fmt == "yaml":
        if "\n" in value:
            body = "\n".join("    " + line for line in value.split("\n"))
            pre = f"record:\n  {key}: |\n"
            return pre + body + "\n  status: active\n", None
        pre = f"record:\n  owner: A. Example\n  {key}: {value}"
        return pre + "\n  status: active\n", len(pre) - len(value)
    if fmt == "shell":
        if "\n" in value:
            pre = f"export {key.upper()}=\""
            return pre + value + "\"\n./deploy.sh\n", len(pre)
        pre = f"export {key.upper()}={value}"
        return pre + "\n./deploy.sh --env staging\n", len(pre) - len(value)
    # JavaScript names are camelCase: `nhs_number` becomes `nhsNumber`.
    camel = re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), key)
    esc = value.replace("\n", "\\n")
    pre = f'const {camel} = "{esc}'
    return pre + '";\nsend(payload);\n', len(pre) - len(esc)


def locate(text, value, start):
    """Span of the value as placed (a multi-line value in JSON or code is
    written with escaped newlines)."""
    for v in (value, value.replace("\n", "\\n"), "\n".join("    " + x for x in value.split("\n"))):
        i = text.find(v)
        if i >= 0:
            if v.startswith("    "):
                return i + 4, i + len(v)
            return i, i + len(v)
    raise RuntimeError("value not placed")
