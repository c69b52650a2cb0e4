#!/usr/bin/env python3
"""The python-stdnum oracle of the [§16.2](docs/codons.md#s16-2) validators (issue 22).

Writes two files, both committed:

- tests/checksum/cases.json: for every validator that python-stdnum
  implements, N valid values (seeded, deterministic; some written with
  separators or in lower case) and every one-digit near miss of the first
  few of them, each with stdnum's verdict on the value's compact form.
  `cases` are values on which SPEC and stdnum agree; `differences` are
  values on which SPEC's wording deliberately differs from stdnum, each
  with the SPEC verdict and the reason. tests/it/checksum_oracle.rs asserts
  that `Checksum::check` gives the listed verdict on every one of them.
- src/checksum/iban_registry.rs: the IBAN registry (country code -> BBAN
  length), from stdnum's iban.dat (itself generated from SWIFT's registry).

Run it through scripts/checksum-oracle.sh, which installs the pinned
python-stdnum in a cached virtual environment.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import re
import string
import sys

import stdnum
from stdnum import damm, luhn, numdb, verhoeff
from stdnum import iban as stdnum_iban
from stdnum.es import cif, dni, nie, nif
from stdnum.gb import nhs
from stdnum.iso7064 import mod_11_2, mod_11_10, mod_97_10
from stdnum.it import codicefiscale
from stdnum.pl import pesel
from stdnum.us import rtn
from stdnum.au import tfn
from stdnum.de import idnr
from stdnum.de import vat as de_vat
from stdnum.fr import nir, siren, tva
from stdnum.in_ import aadhaar, gstin
from stdnum.it import iva
from stdnum.jp import in_ as jp_in
from stdnum.kr import rrn
from stdnum.nl import bsn, btw
from stdnum.pl import nip
from stdnum.at import uid as at_uid
from stdnum.be import vat as be_vat
from stdnum.dk import cvr as dk_cvr
from stdnum.fi import alv as fi_alv
from stdnum.lu import tva as lu_tva
from stdnum.pt import nif as pt_nif
from stdnum.se import vat as se_vat

SEED = 20260216
SEPARATORS = " -./"
DIGITS = string.digits
UPPER = string.ascii_uppercase


def compact(value: str) -> str:
    """[§16.2](docs/codons.md#s16-2)'s compact form: spaces, '-', '.' and '/' removed."""
    return "".join(c for c in value if c not in SEPARATORS)


def rand_digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(DIGITS) for _ in range(n))


def group(value: str, size: int, sep: str) -> str:
    return sep.join(value[i:i + size] for i in range(0, len(value), size))


def dress(rng: random.Random, value: str, case_insensitive: bool) -> str:
    """Writes a valid compact value as a person might: a third of the values
    grouped with a separator, a sixth in lower case where case is ignored."""
    roll = rng.random()
    if roll < 1 / 3 and len(value) > 4:
        value = group(value, rng.choice([3, 4]), rng.choice([" ", "-", ".", "/"]))
    if case_insensitive and rng.random() < 1 / 6:
        value = value.lower()
    return value


# ---------------------------------------------------------------------------
# Validators: SPEC name (or weighted mapping), stdnum's verdict, a generator
# of valid compact values, and optionally SPEC's own verdict where it differs.


def ascii_digits(v: str) -> bool:
    return v.isascii() and v.isdigit()


def luhn_spec(v: str) -> bool:
    return ascii_digits(v) and len(v) >= 2 and luhn.is_valid(v)


def mod11_2_spec(v: str) -> bool:
    """Digits; the last may be an upper-case X."""
    body, last = v[:-1], v[-1:]
    return ((body == "" or ascii_digits(body)) and (ascii_digits(last) or last == "X")
            and mod_11_2.is_valid(v))


def gen_luhn(rng):
    body = rand_digits(rng, rng.randint(1, 18))
    return body + luhn.calc_check_digit(body)


def gen_verhoeff(rng):
    body = rand_digits(rng, rng.randint(1, 18))
    return body + verhoeff.calc_check_digit(body)


def gen_damm(rng):
    body = rand_digits(rng, rng.randint(1, 18))
    return body + damm.calc_check_digit(body)


def gen_mod97(rng):
    n = rng.randint(1, 20)
    alphabet = DIGITS * 3 + UPPER  # mostly digits, some letters
    body = "".join(rng.choice(alphabet) for _ in range(n))
    return body + mod_97_10.calc_check_digits(body)


def gen_iso7064_mod11_10(rng):
    body = rand_digits(rng, rng.randint(1, 18))
    return body + mod_11_10.calc_check_digit(body)


def gen_iso7064_mod11_2(rng):
    body = rand_digits(rng, rng.randint(1, 18))
    return body + mod_11_2.calc_check_digit(body)


def iban_structures() -> list[tuple[str, str]]:
    """(country, BBAN structure) from stdnum's iban.dat, sorted."""
    out = []
    db = numdb.get("iban")
    for prefix in sorted({k for k in _iban_dat_codes()}):
        info = db.info(prefix + "00")
        out.append((prefix, info[0][1]["bban"]))
    return out


def _iban_dat_codes() -> list[str]:
    path = os.path.join(os.path.dirname(stdnum.__file__), "iban.dat")
    codes = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^([A-Z]{2}) ", line)
            if m:
                codes.append(m.group(1))
    return codes


STRUCT_RE = re.compile(r"([1-9][0-9]*)!([nac])")


def bban_length(structure: str) -> int:
    parts = STRUCT_RE.findall(structure)
    assert "".join(f"{n}!{k}" for n, k in parts) == structure, structure
    return sum(int(n) for n, _ in parts)


def gen_bban(rng, structure: str) -> str:
    out = []
    for n, kind in STRUCT_RE.findall(structure):
        alphabet = {"n": DIGITS, "a": UPPER, "c": DIGITS * 2 + UPPER}[kind]
        out.append("".join(rng.choice(alphabet) for _ in range(int(n))))
    return "".join(out)


def make_gen_iban():
    structures = iban_structures()
    state = {"i": 0}

    def gen(rng):
        cc, structure = structures[state["i"] % len(structures)]
        state["i"] += 1
        bban = gen_bban(rng, structure)
        return cc + stdnum_iban.calc_check_digits(cc + "00" + bban) + bban

    return gen


def iban_oracle(v: str) -> bool:
    # SPEC checks the registry length, not the BBAN's n/a/c structure nor
    # national check digits: check_country=False. The generated near misses
    # change digits to digits, so the structure stays as stdnum wants it.
    return stdnum_iban.is_valid(v, check_country=False)


def iban_spec(v: str) -> bool:
    u = v.upper()
    if len(u) < 4 or not u.isascii() or not u.isalnum():
        return False
    lengths = dict((cc, bban_length(s)) for cc, s in iban_structures())
    if u[:2] not in lengths or not u[2:4].isdigit():
        return False
    if len(u) != 4 + lengths[u[:2]]:
        return False
    return mod_97_10.is_valid(u[4:] + u[:4])


def gen_rtn(rng):
    body = rand_digits(rng, 8)
    return body + rtn.calc_check_digit(body)


def gen_nhs(rng):
    while True:
        v = rand_digits(rng, 10)
        if nhs.is_valid(v):
            return v


def gen_pesel(rng):
    start = datetime.date(1850, 1, 1).toordinal()
    end = datetime.date(2099, 12, 31).toordinal()
    d = datetime.date.fromordinal(rng.randint(start, end))
    month = d.month + {18: 80, 19: 0, 20: 20}[d.year // 100]
    body = f"{d.year % 100:02d}{month:02d}{d.day:02d}" + rand_digits(rng, 4)
    return body + pesel.calc_check_digit(body)


def pesel_checksum_only(v: str) -> bool:
    """stdnum.pl.pesel without its birth-date test (SPEC's weighted form
    checks the digits only)."""
    return (v.isascii() and v.isdigit() and len(v) == 11
            and pesel.calc_check_digit(v[:-1]) == v[-1])


def gen_es_nif(rng):
    kind = rng.random()
    if kind < 0.5:
        body = rand_digits(rng, 8)
        return body + dni.calc_check_digit(body)
    if kind < 0.85:
        body = rng.choice("XYZ") + rand_digits(rng, 7)
        return body + nie.calc_check_digit(body)
    body = rand_digits(rng, 7)
    return rng.choice("KLM") + body + dni.calc_check_digit(body)


def es_nif_spec(v: str) -> bool:
    """stdnum.es.nif without the CIF (legal entities): DNI, NIE and the K/L/M
    personal NIFs only."""
    u = v.upper()
    return (len(u) == 9 and u.isascii() and (u[0].isdigit() or u[0] in "XYZKLM")
            and nif.is_valid(u))


def gen_cif(rng):
    body = rng.choice("ABCDEFGHJNPQRSUVW") + rand_digits(rng, 7)
    return body + cif.calc_check_digits(body)[rng.randint(0, 1)]


def es_cif_spec(v: str) -> bool:
    """stdnum.es.cif on ASCII values."""
    return v.isascii() and cif.is_valid(v)


TVA_KEYS = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"


def gen_fr_tva(rng):
    """A French VAT number: a SIREN that passes Luhn (or a Monaco 000…),
    with its numeric key (most) or an alphanumeric key that passes."""
    while True:
        if rng.random() < 0.1:
            digits = "000" + rand_digits(rng, 6)
        else:
            body = rand_digits(rng, 8)
            digits = body + luhn.calc_check_digit(body)
        if rng.random() < 0.7:
            v = f"{int(digits + '12') % 97:02d}" + digits
        else:
            v = rng.choice(TVA_KEYS) + rng.choice(TVA_KEYS[10:]) + digits
            if not tva.is_valid(v):
                continue
        return "FR" + v if rng.random() < 0.8 else v


def fr_tva_spec(v: str) -> bool:
    """stdnum.fr.tva on ASCII values."""
    return v.isascii() and tva.is_valid(v)


OMOCODIA = "LMNPQRSTUV"
CF_DIGIT_PLACES = [6, 7, 9, 10, 12, 13, 14]


def gen_codice_fiscale(rng):
    name = "".join(rng.choice(UPPER) for _ in range(6))
    year = rand_digits(rng, 2)
    month = rng.choice("ABCDEHLMPRST")
    day = rng.randint(1, 28) + rng.choice([0, 40])
    place = rng.choice(UPPER) + rand_digits(rng, 3)
    body = list(name + year + month + f"{day:02d}" + place)
    if rng.random() < 0.3:  # omocodia: digits from the right become letters
        for i in sorted(CF_DIGIT_PLACES, reverse=True)[: rng.randint(1, 7)]:
            body[i] = OMOCODIA[int(body[i])]
    body = "".join(body)
    return body + codicefiscale.calc_check_digit(body)


def codice_fiscale_spec(v: str) -> bool:
    """stdnum.it.codicefiscale for the 16-character personal code, without
    its birth-date test and without the 11-digit company number."""
    u = v.upper()
    return (len(u) == 16 and u.isascii() and bool(codicefiscale._code_re.match(u))
            and codicefiscale.calc_check_digit(u[:-1]) == u[-1])


def gen_npi(rng):
    body = rand_digits(rng, 9)
    return body + luhn.calc_check_digit("80840" + body)


def npi_oracle(v: str) -> bool:
    return v.isascii() and v.isdigit() and len(v) == 10 and luhn.is_valid("80840" + v)


def gen_fr_nir(rng):
    sex = rng.choice("12")
    year = rand_digits(rng, 2)
    month = f"{rng.randint(1, 12):02d}"
    dept = rng.choice(["2A", "2B"]) if rng.random() < 0.15 else f"{rng.randint(1, 95):02d}"
    body = sex + year + month + dept + rand_digits(rng, 6)
    return body + nir.calc_check_digits(body)


def fr_nir_spec(v: str) -> bool:
    """stdnum.fr.nir on SPEC's compact form (ASCII only)."""
    return v.isascii() and nir.is_valid(v)


def gen_kr_rrn(rng):
    d = datetime.date.fromordinal(rng.randint(datetime.date(1900, 1, 1).toordinal(),
                                              datetime.date(2024, 12, 31).toordinal()))
    century = rng.choice("12" if d.year < 2000 else "34")
    body = d.strftime("%y%m%d") + century + f"{rng.randint(0, 96):02d}" + rand_digits(rng, 3)
    return body + rrn.calc_check_digit(body)


def kr_rrn_spec(v: str) -> bool:
    """stdnum.kr.rrn's check digit alone: its birth date and place-of-birth
    tests are not SPEC's."""
    return ascii_digits(v) and len(v) == 13 and rrn.calc_check_digit(v[:-1]) == v[-1]


def gen_jp_my_number(rng):
    body = rand_digits(rng, 11)
    return body + jp_in.calc_check_digit(body)


GSTIN_ALPHABET = DIGITS + UPPER


def gen_gstin(rng):
    pan = ("".join(rng.choice(UPPER) for _ in range(3)) + rng.choice("ABCFGHLJPTK")
           + rng.choice(UPPER) + f"{rng.randint(1, 9999):04d}" + rng.choice(UPPER))
    body = f"{rng.randint(1, 37):02d}" + pan + rng.choice(GSTIN_ALPHABET[1:]) + "Z"
    return body + luhn.calc_check_digit(body, GSTIN_ALPHABET)


def gstin_spec(v: str) -> bool:
    return v.isascii() and gstin.is_valid(v)


def gen_nl_btw(rng):
    """A Dutch VAT number: half on a valid BSN, half a sole trader's 2020
    number (MOD 97-10 over NL, the digits, B and the suffix)."""
    mod97 = rng.random() < 0.5
    while True:
        digits = rand_digits(rng, 9)
        suffix = f"{rng.randint(1, 99):02d}"
        v = "NL" + digits + "B" + suffix
        if int(digits) > 0 and (mod_97_10.is_valid(v) if mod97 else bsn.is_valid(digits)):
            return v if rng.random() < 0.8 else v[2:]


def nl_btw_spec(v: str) -> bool:
    """stdnum.nl.btw on ASCII values (stdnum's isdigits takes other digits)
    with exactly nine digits before the B (stdnum pads fewer with zeros)."""
    c = re.sub(r"[ ./-]", "", v).upper()
    c = c[2:] if c.startswith("NL") else c
    return v.isascii() and len(c) == 12 and btw.is_valid(v)


def gen_at_uid(rng):
    body = "U" + rand_digits(rng, 7)
    v = body + at_uid.calc_check_digit(body)
    return "AT" + v if rng.random() < 0.5 else v


def gen_pt_nif(rng):
    body = str(rng.randint(1, 9)) + rand_digits(rng, 7)
    return body + pt_nif.calc_check_digit(body)


def gen_be_vat(rng):
    """The 10 digits of a Belgian VAT number: 0 or 1, 7 digits, then
    97 - (the first 8 mod 97) as two digits."""
    body = rng.choice("01") + rand_digits(rng, 7)
    if int(body) == 0:
        body = "01234567"
    return body + f"{97 - int(body) % 97:02d}"


def gen_lu_tva(rng):
    body = rand_digits(rng, 6)
    return body + lu_tva.calc_check_digits(body)


def gen_se_orgnr(rng):
    body = rand_digits(rng, 9)
    return body + luhn.calc_check_digit(body)


def gen_until(valid, n):
    """Random n-digit values until `valid` takes one (a tenth or so pass)."""
    def gen(rng):
        while True:
            v = rand_digits(rng, n)
            if valid(v):
                return v
    return gen


def weighted_spec(weights, modulus, remainder=0):
    """SPEC's weighted form: exactly len(weights) ASCII digits, the sum."""
    def spec(v: str) -> bool:
        return (ascii_digits(v) and len(v) == len(weights)
                and sum(w * int(d) for w, d in zip(weights, v)) % modulus == remainder)
    return spec


BSN_WEIGHTS = [9, 8, 7, 6, 5, 4, 3, 2, 10]
TFN_WEIGHTS = [1, 4, 3, 7, 5, 8, 6, 9, 10]
MEDICARE_WEIGHTS = [1, 3, 7, 9, 1, 3, 7, 9, 9, 0]
NIP_WEIGHTS = [6, 5, 7, 2, 3, 4, 5, 6, 7, 10]
# Belgium: (the first 8 digits + the last 2) mod 97 = 0, as weights 10^k mod 97.
BE_VAT_WEIGHTS = [76, 27, 90, 9, 30, 3, 10, 1, 10, 1]
# Luxembourg: the first 6 digits mod 89 = the last 2, as (first 6 − last 2)
# mod 89 = 0 with weights 10^k mod 89 and −10, −1 mod 89.
LU_TVA_WEIGHTS = [53, 32, 21, 11, 10, 1, 79, 88]
DK_CVR_WEIGHTS = [2, 7, 6, 5, 4, 3, 2, 1]
FI_ALV_WEIGHTS = [7, 9, 10, 5, 8, 4, 2, 1]


def medicare_published(v: str) -> bool:
    """The Australian Medicare card number's check digit as Services
    Australia publishes it (stdnum has no Medicare module): ten digits, the
    ninth (Σ of the first eight weighted 1, 3, 7, 9, 1, 3, 7, 9) mod 10, the
    tenth the card's issue number (not checked). The first digit (2-6) is
    the pack's pattern's, not the checksum's."""
    return (ascii_digits(v) and len(v) == 10
            and sum(w * int(d) for w, d in zip([1, 3, 7, 9, 1, 3, 7, 9], v)) % 10 == int(v[8]))


def gen_medicare(rng):
    body = str(rng.randint(2, 6)) + rand_digits(rng, 7)
    check = sum(w * int(d) for w, d in zip([1, 3, 7, 9, 1, 3, 7, 9], body)) % 10
    return body + str(check) + str(rng.randint(1, 9))


def gen_idnr(rng):
    """A German tax id: 10 digits, not starting with 0, exactly one digit
    twice or three times, then the ISO 7064 MOD 11,10 check digit."""
    while True:
        digits = list(DIGITS)
        rng.shuffle(digits)
        times = rng.choice([2, 3])
        body = digits[:11 - times]  # distinct digits
        body += [body[0]] * (times - 1)
        rng.shuffle(body)
        body = "".join(body)
        if body[0] != "0":
            v = body + mod_11_10.calc_check_digit(body)
            if idnr.is_valid(v):
                return v


def gen_de_vat(rng):
    body = str(rng.randint(1, 9)) + rand_digits(rng, 7)
    return body + mod_11_10.calc_check_digit(body)


def gen_it_iva(rng):
    office = rng.choice([f"{rng.randint(1, 100):03d}", "120", "121", "888", "999"])
    body = f"{rng.randint(1, 9999999):07d}" + office
    return body + luhn.calc_check_digit(body)


def gen_aadhaar(rng):
    while True:
        body = str(rng.randint(2, 9)) + rand_digits(rng, 10)
        v = body + verhoeff.calc_check_digit(body)
        if aadhaar.is_valid(v):
            return v


VALIDATORS = [
    # (checksum, oracle name, oracle verdict, SPEC verdict, generator, case-insensitive)
    ("luhn", "stdnum.luhn", luhn.is_valid, luhn_spec, gen_luhn, False),
    ("verhoeff", "stdnum.verhoeff", verhoeff.is_valid,
     lambda v: ascii_digits(v) and len(v) >= 2 and verhoeff.is_valid(v), gen_verhoeff, False),
    ("damm", "stdnum.damm", damm.is_valid,
     lambda v: ascii_digits(v) and len(v) >= 2 and damm.is_valid(v), gen_damm, False),
    ("mod97", "stdnum.iso7064.mod_97_10", mod_97_10.is_valid,
     lambda v: v.isascii() and v.isalnum() and mod_97_10.is_valid(v), gen_mod97, True),
    ("iban", "stdnum.iban (check_country=False)", iban_oracle, iban_spec, make_gen_iban(), True),
    ("iso7064_mod11_10", "stdnum.iso7064.mod_11_10", mod_11_10.is_valid,
     lambda v: ascii_digits(v) and mod_11_10.is_valid(v), gen_iso7064_mod11_10, False),
    ("iso7064_mod11_2", "stdnum.iso7064.mod_11_2", mod_11_2.is_valid, mod11_2_spec,
     gen_iso7064_mod11_2, False),
    ({"weights": [3, 7, 1, 3, 7, 1, 3, 7, 1], "modulus": 10, "remainder": 0},
     "stdnum.us.rtn", rtn.is_valid, None, gen_rtn, False),
    ({"weights": [10, 9, 8, 7, 6, 5, 4, 3, 2, 1], "modulus": 11, "remainder": 0},
     "stdnum.gb.nhs", nhs.is_valid, None, gen_nhs, False),
    ({"weights": [1, 3, 7, 9, 1, 3, 7, 9, 1, 3, 1], "modulus": 10, "remainder": 0},
     "stdnum.pl.pesel", pesel.is_valid, pesel_checksum_only, gen_pesel, False),
    ("es_nif", "stdnum.es.nif", nif.is_valid, es_nif_spec, gen_es_nif, True),
    ("it_codice_fiscale", "stdnum.it.codicefiscale", codicefiscale.is_valid,
     codice_fiscale_spec, gen_codice_fiscale, True),
    ("npi", "stdnum.luhn over '80840' + the value (stdnum has no NPI module)",
     npi_oracle, None, gen_npi, False),
    ("fr_nir", "stdnum.fr.nir", nir.is_valid, fr_nir_spec, gen_fr_nir, True),
    ("kr_rrn", "stdnum.kr.rrn", rrn.is_valid, kr_rrn_spec, gen_kr_rrn, False),
    ("jp_my_number", "stdnum.jp.in_", jp_in.is_valid,
     lambda v: ascii_digits(v) and jp_in.is_valid(v), gen_jp_my_number, False),
    ("in_gstin", "stdnum.in_.gstin", gstin.is_valid, gstin_spec, gen_gstin, True),
    ("nl_btw", "stdnum.nl.btw", btw.is_valid, nl_btw_spec, gen_nl_btw, True),
    ("fr_tva", "stdnum.fr.tva", tva.is_valid, fr_tva_spec, gen_fr_tva, True),
    ("es_cif", "stdnum.es.cif", cif.is_valid, es_cif_spec, gen_cif, True),
    ("at_uid", "stdnum.at.uid", at_uid.is_valid, lambda v: v.isascii() and at_uid.is_valid(v),
     gen_at_uid, True),
    ("pt_nif", "stdnum.pt.nif", pt_nif.is_valid, lambda v: v.isascii() and pt_nif.is_valid(v),
     gen_pt_nif, True),
]

# The curated packs' (packs/*.yaml) other identifiers, expressed with the
# validators above: each expression against the stdnum module of the
# identifier (or the published algorithm where stdnum has none). The label
# of an expression is its oracle.
EXPRESSIONS = [
    ({"weights": BSN_WEIGHTS, "modulus": 11, "remainder": 0}, "stdnum.nl.bsn", bsn.is_valid,
     weighted_spec(BSN_WEIGHTS, 11), gen_until(bsn.is_valid, 9), False),
    ({"weights": TFN_WEIGHTS, "modulus": 11, "remainder": 0}, "stdnum.au.tfn", tfn.is_valid,
     weighted_spec(TFN_WEIGHTS, 11), gen_until(tfn.is_valid, 9), False),
    ({"weights": MEDICARE_WEIGHTS, "modulus": 10, "remainder": 0},
     "AU Medicare check digit, published algorithm (stdnum has no Medicare module)",
     medicare_published, None, gen_medicare, False),
    ({"weights": NIP_WEIGHTS, "modulus": 11, "remainder": 0}, "stdnum.pl.nip", nip.is_valid,
     weighted_spec(NIP_WEIGHTS, 11), gen_until(nip.is_valid, 10), False),
    ("iso7064_mod11_10", "stdnum.de.idnr", idnr.is_valid,
     lambda v: ascii_digits(v) and mod_11_10.is_valid(v), gen_idnr, False),
    ("iso7064_mod11_10", "stdnum.de.vat (the 9 digits after DE)", de_vat.is_valid,
     lambda v: ascii_digits(v) and mod_11_10.is_valid(v), gen_de_vat, False),
    ("luhn", "stdnum.it.iva (the 11 digits after IT)", iva.is_valid, luhn_spec, gen_it_iva, False),
    ("verhoeff", "stdnum.in_.aadhaar", aadhaar.is_valid,
     lambda v: ascii_digits(v) and len(v) >= 2 and verhoeff.is_valid(v), gen_aadhaar, False),
    ({"weights": BE_VAT_WEIGHTS, "modulus": 97, "remainder": 0},
     "stdnum.be.vat (the 10 digits after BE)", be_vat.is_valid,
     weighted_spec(BE_VAT_WEIGHTS, 97), gen_be_vat, False),
    ({"weights": LU_TVA_WEIGHTS, "modulus": 89, "remainder": 0},
     "stdnum.lu.tva (the 8 digits after LU)", lu_tva.is_valid,
     weighted_spec(LU_TVA_WEIGHTS, 89), gen_lu_tva, False),
    ({"weights": DK_CVR_WEIGHTS, "modulus": 11, "remainder": 0},
     "stdnum.dk.cvr (the 8 digits after DK)", dk_cvr.is_valid,
     weighted_spec(DK_CVR_WEIGHTS, 11), gen_until(dk_cvr.is_valid, 8), False),
    ({"weights": FI_ALV_WEIGHTS, "modulus": 11, "remainder": 0},
     "stdnum.fi.alv (the 8 digits after FI)", fi_alv.is_valid,
     weighted_spec(FI_ALV_WEIGHTS, 11), gen_until(fi_alv.is_valid, 8), False),
    ("luhn", "stdnum.se.vat (the 10 digits before its 01)", lambda v: se_vat.is_valid(v + "01"),
     luhn_spec, gen_se_orgnr, False),
]

# Hand-picked inputs on the edges of each SPEC rule, judged by stdnum too.
EDGES = {
    "luhn": ["0", "00", "18", "", "7894", "78949", "4111111111111111", "4111 1111 1111 1111",
             "4111-1111-1111-1112", "79927398713", "79927398710", "0000000000", "12a4"],
    "verhoeff": ["0", "", "2363", "2364", "236", "1428570", "12345678902", "1234567890"],
    "damm": ["0", "", "5724", "5727", "572", "4242", "00"],
    "mod97": ["", "1", "97", "98", "3214282912345698765432161182", "GB82WEST", "gb82west",
              "DE89370400440532013000"],
    "iban": ["DE89 3704 0044 0532 0130 00", "de89370400440532013000", "DE8937040044053201300",
             "DE893704004405320130000", "GB82 WEST 1234 5698 7654 32", "GB82WEST12345698765433",
             "XX89370400440532013000", "DEAB370400440532013000", "NL91ABNA0417164300",
             "BE71 0961 2345 6769", "BE71096123456760", "", "DE", "DE89",
             "DE0537040044053201300A"],
    "iso7064_mod11_10": ["", "1", "0", "794623", "794624", "00200667308", "00200667309"],
    "iso7064_mod11_2": ["", "1", "X", "0794", "0795", "079X", "07X4", "000000021825009X",
                        "000000021825009x", "0000000218250097", "00X3"],
    "es_nif": ["54362315K", "54362315-K", "54362315Z", "X2482300W", "x-2482300w", "X2482300A",
               "X-5253868-R", "M-1234567-L", "B64717838", "B58378431", "54362315",
               "Y1234567X", "Z1234567R"],
    "it_codice_fiscale": ["RCCMNL83S18D969H", "rccmnl83s18d969h", "RCCMNL83S18D969A",
                          "RCCMNL83S18D969", "00743110157", "CNTCHR83T41D969D",
                          "MRTNTN23M02D969P", "MRTNTN23M02D96VX", "RCCMNL83B31D969E"],
    "npi": ["1234567893", "1234567890", "123456789", "12345678930", "80840 1234567893"],
    "fr_nir": ["2 95 10 99 126 111 93", "295109912611199", "253072B07300470", "253072A07300443",
               "253072a07300443", "253072C07300443", "253072A07300470", "6546546546546703",
               "2951099126111", "1 85 05 78 006 084 36"],
    "kr_rrn": ["971013-9019902", "971013-9019903", "971313-9019909", "971013-9979908", "9710139019"],
    "jp_my_number": ["6214 9832 0257", "6214 9832 0258", "6214 9832 025X", "62149832025"],
    "in_gstin": ["27AAPFU0939F1ZV", "27aapfu0939f1zv", "27AAPFU0939F1Z", "369296450896540",
                 "27AAPFU0939F1AA", "27AAPFU0939F1ZO", "38AAPFU0939F1ZV", "27AAPEU0939F1ZV",
                 "27AAPFU0939F0ZV", "27AAPFU0000F1ZV"],
    "fr_tva": ["FR40303265045", "40303265045", "fr40303265045", "FR 40 303 265 045",
               "FR41303265045", "FR40303265046", "FRK7399859412", "K7399859412", "FR4Z123456782",
               "FR00000000190", "FR4030326504", "FR403032650450", "FRI7399859412",
               "FRO7399859412", "DE40303265045", "FR 000 000 000 00"],
    "es_cif": ["A13585625", "A1358562E", "a1358562e", "A-1358562-5", "A13585626", "A1358562F",
               "I13585625", "K13585625", "A1358562", "A135856250", "B58378431", "P0800000B",
               "Q2826000H", "Q28260004"],
    "nl_btw": ["NL004495445B01", "004495445B01", "nl004495445b01", "NL478878384B72",
               "NL 478878384B72", "NL004495446B01", "NL478878384B73", "NL004495445B00",
               "NL000000000B01", "NL004495445C01", "NL04495445B01", "DE004495445B01",
               "NL004495445B1", "NL0044954450B01"],
    "at_uid": ["ATU13585627", "AT U13585627", "U13585627", "atu13585627", "U13585626",
               "13585627", "U1358562", "U135856270", "ATX13585627", "DEU13585627"],
    "pt_nif": ["PT 501 964 843", "501964843", "pt501964843", "501964842", "019648430",
               "50196484", "5019648430", "ES501964843"],
}

# Hand-picked inputs of the weighted forms and the expressions, by oracle.
# Two valid PESELs whose date stdnum rejects (and SPEC's weighted form does
# not check): digits pass the weighted sum, the month or day is impossible.
WEIGHTED_EDGES = {
    "stdnum.pl.pesel": ["02381307589", "44053201353"],
    "stdnum.us.rtn": ["111000025", "112000025", "11100002B"],
    "stdnum.gb.nhs": ["943-476-5870", "9434765871", "943476587"],
    "stdnum.nl.bsn": ["111222333", "111222334", "000000000", "11122233", "1112.22.333"],
    "stdnum.au.tfn": ["123 456 782", "123456783", "12345678", "00000000"],
    "AU Medicare check digit, published algorithm (stdnum has no Medicare module)":
        ["2123 45670 1", "2123456709", "2123456711", "212345670"],
    "stdnum.pl.nip": ["8567346215", "8567346216", "PL8567346215"],
    "stdnum.de.idnr": ["36 574 261 809", "36574261890", "01234567896", "12345678903",
                       "11145678908"],
    "stdnum.de.vat (the 9 digits after DE)": ["136695976", "136695978", "036695979"],
    "stdnum.it.iva (the 11 digits after IT)": ["00743110157", "00743110158", "00000000000",
                                                "12345674001"],
    "stdnum.be.vat (the 10 digits after BE)": ["0428759497", "0403019261", "0431150351",
                                               "428759497", "0000000000", "2428759497"],
    "stdnum.lu.tva (the 8 digits after LU)": ["15027442", "15027443", "00000000", "00000089",
                                              "1502744"],
    "stdnum.dk.cvr (the 8 digits after DK)": ["13585628", "13585627", "00000000", "1358562"],
    "stdnum.fi.alv (the 8 digits after FI)": ["20774740", "20774741", "2077474"],
    "stdnum.se.vat (the 10 digits before its 01)": ["1234567897", "1234567891", "123456789"],
    "stdnum.in_.aadhaar": ["234123412346", "234123412347", "123412341234", "2341 2341 2346",
                           "123412341232"],
}

DIFFERENCE_REASONS = {
    "luhn": "SPEC: only digits, at least two (stdnum.luhn takes a single digit)",
    "verhoeff": "SPEC: only digits, at least two (stdnum.verhoeff takes a single digit)",
    "damm": "SPEC: only digits, at least two (stdnum.damm takes a single digit)",
    "mod97": "SPEC: only ASCII digits and letters",
    "iban": "SPEC: the registry's BBAN length and two check digits; stdnum also tests the BBAN's n/a/c structure",
    "iso7064_mod11_2": "SPEC: X only in the last place, upper case (stdnum takes X anywhere)",
    "iso7064_mod11_10": "SPEC: only ASCII digits",
    "kr_rrn": "kr_rrn is the check digit alone; stdnum.kr.rrn also tests the birth date and place of birth",
    "stdnum.nl.bsn": "SPEC's weighted form takes exactly 9 digits, zeros too; stdnum.nl.bsn pads 8 digits with a 0 "
                     "and rejects 000000000",
    "stdnum.au.tfn": "SPEC's weighted form takes the 9-digit TFN only; stdnum.au.tfn also takes 8 digits",
    "stdnum.de.idnr": "iso7064_mod11_10 is the check digit alone; stdnum.de.idnr also wants 11 digits, no leading 0 "
                      "and exactly one digit repeated twice or three times in the first ten",
    "stdnum.de.vat (the 9 digits after DE)": "iso7064_mod11_10 takes any length and a leading 0 "
                                             "(the pack's pattern wants [1-9][0-9]{8})",
    "stdnum.it.iva (the 11 digits after IT)": "luhn is the check digit alone; stdnum.it.iva also tests the "
                                              "office code and a zero number",
    "stdnum.in_.aadhaar": "verhoeff is the check digit alone; stdnum.in_.aadhaar also wants 12 digits, "
                          "the first 2-9 (the pack's pattern) and no palindrome",
    "stdnum.pl.nip": "stdnum.pl.nip drops a PL prefix; SPEC's weighted form takes digits only",
    "stdnum.be.vat (the 10 digits after BE)": "the weighted form is the mod 97 sum alone; stdnum.be.vat also pads "
                                              "9 digits with a 0, wants the first digit 0 or 1 (the pack's "
                                              "pattern) and rejects all zeros",
    "stdnum.lu.tva (the 8 digits after LU)": "the weighted form takes the last two digits mod 89 (the pack's "
                                             "pattern wants them below 89)",
    "stdnum.se.vat (the 10 digits before its 01)": "luhn takes any number of digits from two; stdnum.se.orgnr "
                                                   "wants ten (the pack's pattern)",
    "stdnum.dk.cvr (the 8 digits after DK)": "the weighted form takes a leading 0; stdnum.dk.cvr does not "
                                             "(the pack's pattern wants [1-9])",
    "stdnum.pl.pesel": "SPEC's weighted form checks the digits only; stdnum.pl.pesel also rejects an impossible birth date",
    "es_nif": "es_nif is the natural persons' NIF (DNI, NIE, K/L/M); stdnum.es.nif also takes a legal entity's CIF",
    "it_codice_fiscale": "it_codice_fiscale is the 16-character personal code's structure and check letter; "
                         "stdnum also tests the birth date and takes the 11-digit company number",    "nl_btw": "nl_btw takes exactly nine digits before the B; stdnum.nl.btw pads fewer with zeros",
}


def near_misses(value: str) -> list[str]:
    """Every value that differs from `value` in one digit (a digit changed to
    another digit), and, where the last character is a check letter or X, that
    character changed to every other letter or digit."""
    out = []
    for i, c in enumerate(value):
        if c.isdigit():
            for d in DIGITS:
                if d != c:
                    out.append(value[:i] + d + value[i + 1:])
    last = value[-1]
    if last.isalpha():
        for d in UPPER + DIGITS:
            if d != last:
                out.append(value[:-1] + d)
    return out


def build(n_valid: int, n_near: int) -> dict:
    rng = random.Random(SEED)
    validators = []
    entries = [(e, False) for e in VALIDATORS] + [(e, True) for e in EXPRESSIONS]
    for (checksum, oracle_name, oracle, spec, gen, ci), expression in entries:
        label = checksum if isinstance(checksum, str) and not expression else oracle_name
        spec = spec or oracle
        valid = []
        seen = set()
        while len(valid) < n_valid:
            v = gen(rng)
            if v in seen:
                continue
            seen.add(v)
            assert oracle(v) and spec(v), (label, v)
            valid.append(v)
        inputs = [dress(rng, v, ci) for v in valid]
        for v in valid[:n_near]:
            inputs.extend(near_misses(v))
        inputs.extend(EDGES.get(label, []))
        inputs.extend(WEIGHTED_EDGES.get(oracle_name, []))
        if label == "es_nif":
            inputs.extend(gen_cif(rng) for _ in range(20))
        cases, differences = [], []
        done = set()
        for value in inputs:
            if value in done:
                continue
            done.add(value)
            c = compact(value)
            said = bool(oracle(c)) if c else False
            want = bool(spec(c)) if c else False
            if said == want:
                cases.append([value, want])
            else:
                reason = DIFFERENCE_REASONS.get(label) or DIFFERENCE_REASONS[oracle_name]
                differences.append({"value": value, "stdnum": said, "spec": want, "why": reason})
        validators.append({
            "checksum": checksum,
            "oracle": oracle_name,
            "cases": cases,
            "differences": differences,
        })
    return {
        "generated_by": "scripts/checksum-oracle.sh (scripts/checksum-oracle.py)",
        "python_stdnum": stdnum.__version__,
        "seed": SEED,
        "note": "each case is [value, verdict]; the verdict is stdnum's and [§16.2](docs/codons.md#s16-2)'s on the "
                "value's compact form; `differences` lists where SPEC differs from stdnum, and why",
        "validators": validators,
    }


def write_json(doc: dict, path: str) -> None:
    """One case per line: small diffs when the oracle is regenerated."""
    lines = ["{"]
    for key in ("generated_by", "python_stdnum", "seed", "note"):
        lines.append(f"  {json.dumps(key)}: {json.dumps(doc[key], ensure_ascii=False)},")
    lines.append('  "validators": [')
    for vi, v in enumerate(doc["validators"]):
        lines.append("    {")
        lines.append(f'      "checksum": {json.dumps(v["checksum"])},')
        lines.append(f'      "oracle": {json.dumps(v["oracle"])},')
        lines.append('      "cases": [')
        for ci, c in enumerate(v["cases"]):
            comma = "," if ci + 1 < len(v["cases"]) else ""
            lines.append(f"        {json.dumps(c, ensure_ascii=False)}{comma}")
        lines.append("      ],")
        lines.append('      "differences": [')
        for di, d in enumerate(v["differences"]):
            comma = "," if di + 1 < len(v["differences"]) else ""
            lines.append(f"        {json.dumps(d, ensure_ascii=False)}{comma}")
        lines.append("      ]")
        lines.append("    }" + ("," if vi + 1 < len(doc["validators"]) else ""))
    lines.append("  ]")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    json.loads(text)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def write_registry(path: str) -> None:
    rows = [(cc, bban_length(s)) for cc, s in iban_structures()]
    out = [
        "//! The IBAN registry: each country code with its BBAN length ([§16.2](docs/codons.md#s16-2),",
        "//! `iban`). Generated by `scripts/checksum-oracle.sh` from python-stdnum",
        f"//! {stdnum.__version__}'s `stdnum/iban.dat` (itself generated from SWIFT's IBAN",
        "//! registry): do not edit by hand, regenerate.",
        "",
        "/// `(country code, BBAN length)`, sorted by country code.",
        "pub(super) const BBAN_LENGTHS: &[([u8; 2], u8)] = &[",
    ]
    for cc, n in rows:
        out.append(f'    (*b"{cc}", {n}),')
    out.append("];")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--valid", type=int, default=200, help="valid values per validator")
    p.add_argument("--near", type=int, default=3, help="values whose near misses are listed")
    p.add_argument("--cases", default="tests/checksum/cases.json")
    p.add_argument("--registry", default="src/checksum/iban_registry.rs")
    args = p.parse_args()
    doc = build(args.valid, args.near)
    os.makedirs(os.path.dirname(args.cases), exist_ok=True)
    write_json(doc, args.cases)
    write_registry(args.registry)
    total = sum(len(v["cases"]) + len(v["differences"]) for v in doc["validators"])
    for v in doc["validators"]:
        name = v["checksum"] if isinstance(v["checksum"], str) else "weighted"
        name = f"{name} ({v['oracle']})"
        print(f"{name}: {len(v['cases'])} cases, {len(v['differences'])} differences")
    print(f"{total} cases in {args.cases} ({os.path.getsize(args.cases)} bytes); "
          f"{args.registry}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
