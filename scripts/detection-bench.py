#!/usr/bin/env python3
"""Detection quality of the curated packs (packs/*.yaml) against Microsoft
Presidio ([§16.5](docs/curated-packs.md#s16-5), issue 23 item 3). Run it through scripts/detection-bench,
which installs the pinned python-stdnum and presidio-analyzer.

Texts, from a fixed seed (scripts/detection_bench/gen.py): for every entity,
valid values (python-stdnum check digits; FAKE random credentials) placed in
prose, JSON, YAML, shell and code with the context words the pack needs
(recall), the same without them (reported apart), one-character near misses
in the same places (must not be detected) and look-alikes (UUIDs, hashes,
order numbers, dates, phone numbers, digit runs).

Every text goes through the pack of its family (`helixor-pack run --jsonl`,
one process per pack, `--runs` times, each run followed by a share of
Presidio's texts so that both sides run under the same load; a text's
engine time is the mean of its runs, and every run must give the same
actions, receipts and spans) and through Presidio's AnalyzerEngine (its predefined
pattern recognizers, spaCy blank English pipeline, no model download). A
detection counts when a reported span overlaps the labelled value: for ours
any trigger span, for Presidio a result of a type mapped to the entity.
False positives: every other span (ours: any trigger; Presidio: any result
of a type mapped to the family), after merging overlapping spans.
"""
import argparse
import importlib.metadata as md
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from detection_bench import gen as G  # noqa: E402

DEMO = os.path.join(ROOT, "config", "demo")
FAMILY_PACK = {"credentials": "secrets", "US": "pii_us", "EU": "pii_eu", "IN": "pii_in", "APAC": "pii_apac"}

# (family, entity, presidio types or None, generator, near miss, form,
#  prose phrase, key, needs context, checksum-backed)
E = []


def ent(fam, name, ptypes, gen, near, form, phrase, key, needs_ctx, checksum):
    E.append(dict(family=fam, entity=name, ptypes=ptypes, gen=gen, near=near, form=form,
                  phrase=phrase, key=key, needs_ctx=needs_ctx, checksum=checksum))


ent("US", "SSN", ["US_SSN"], G.g_ssn, G.n_ssn, G.f_ssn, "my SSN is", "ssn", False, False)
ent("US", "ITIN", ["US_ITIN"], G.g_itin, G.n_itin, G.f_dash_3_2_4, "my ITIN is", "itin", False, False)
ent("US", "payment card", ["CREDIT_CARD"], G.g_card, G.n_luhn_last, G.f_card, "my card number is", "card_number", False, True)
ent("US", "ABA routing", ["ABA_ROUTING_NUMBER", "US_BANK_NUMBER"], G.g_aba, G.n_aba, G.f_plain,
    "the bank routing number is", "routing_number", True, True)
ent("US", "NPI", None, G.g_npi, G.n_npi, G.f_plain, "the doctor's NPI is", "npi", True, True)
ent("US", "passport", ["US_PASSPORT"], G.g_passport, G.n_passport, G.f_plain, "my passport number is",
    "passport_number", True, False)
ent("EU", "IBAN", ["IBAN_CODE"], G.g_iban, G.n_iban, G.f_iban, "please pay to IBAN", "iban", False, True)
ent("EU", "UK NHS", ["UK_NHS"], G.g_nhs, G.n_nhs, G.f_nhs, "the patient's NHS number is", "nhs_number", True, True)
ent("EU", "UK NINO", ["UK_NINO"], G.g_nino, G.n_nino, G.f_nino, "my national insurance number is", "nino", False, False)
ent("EU", "DE tax id", None, G.g_idnr, G.n_idnr, G.f_idnr, "meine Steuer-IdNr lautet", "steuer_id", True, True)
ent("EU", "ES NIF/NIE", ["ES_NIF", "ES_NIE"], G.g_es_nif, G.n_es_nif, G.f_es_nif, "mi NIF es", "nif", False, True)
ent("EU", "IT codice fiscale", ["IT_FISCAL_CODE"], G.g_cf, G.n_cf, G.f_plain, "il mio codice fiscale è",
    "codice_fiscale", False, True)
ent("EU", "FR NIR", None, G.g_nir, G.n_nir, G.f_nir, "mon numéro de sécurité sociale est", "nir", False, True)
ent("EU", "NL BSN", None, G.g_bsn, G.n_bsn, G.f_bsn, "mijn BSN is", "bsn", True, True)
ent("EU", "PL PESEL", ["PL_PESEL"], G.g_pesel, G.n_pesel, G.f_plain, "mój numer PESEL to", "pesel", True, True)
ent("EU", "VAT DE", None, G.g_vat_de, G.n_vat(lambda w: G.de_vat.is_valid(w)), G.f_vat, "our VAT number is", "vat_id", False, True)
ent("EU", "VAT IT", ["IT_VAT_CODE"], G.g_vat_it, G.n_vat(lambda w: G.iva.is_valid(w[2:])), G.f_vat,
    "our VAT number is", "vat_id", False, True)
ent("EU", "VAT PL", None, G.g_vat_pl, G.n_vat(lambda w: G.nip.is_valid(w[2:])), G.f_vat, "our VAT number is", "vat_id", False, True)
ent("EU", "VAT NL", None, G.g_vat_nl, G.n_vat(lambda w: G.btw.is_valid(w), 4), G.f_plain,
    "our VAT number is", "vat_id", False, True)
ent("EU", "VAT ES", None, G.g_vat_es, G.n_vat(lambda w: G.nif.is_valid(w[2:]), 1, G.U), G.f_vat,
    "our VAT number is", "vat_id", False, True)
ent("EU", "VAT FR", None, G.g_vat_fr, G.n_vat(lambda w: G.tva.is_valid(w), 2), G.f_vat,
    "our VAT number is", "vat_id", False, True)
ent("EU", "VAT ES (CIF)", None, G.g_vat_es_cif, G.n_vat(lambda w: G.cif.is_valid(w[2:]), 2), G.f_vat,
    "our VAT number is", "vat_id", False, True)
ent("EU", "VAT AT", None, G.g_vat_at, G.n_vat(lambda w: G.at_uid.is_valid(w)), G.f_vat,
    "our VAT number is", "vat_id", False, True)
ent("EU", "VAT BE", None, G.g_vat_be, G.n_vat(lambda w: G.be_vat.is_valid(w)), G.f_vat,
    "our VAT number is", "vat_id", False, True)
ent("EU", "VAT PT", None, G.g_vat_pt, G.n_vat(lambda w: G.pt_nif.is_valid(w)), G.f_vat,
    "our VAT number is", "vat_id", False, True)
ent("EU", "VAT LU", None, G.g_vat_lu, G.n_vat(lambda w: G.lu_tva.is_valid(w)), G.f_vat,
    "our VAT number is", "vat_id", False, True)
ent("EU", "VAT DK", None, G.g_vat_dk, G.n_vat(lambda w: G.dk_cvr.is_valid(w)), G.f_vat,
    "our VAT number is", "vat_id", False, True)
ent("EU", "VAT FI", None, G.g_vat_fi, G.n_vat(lambda w: G.fi_alv.is_valid(w)), G.f_vat,
    "our VAT number is", "vat_id", False, True)
ent("EU", "VAT SE", None, G.g_vat_se, G.n_vat(lambda w: G.se_vat.is_valid(w), 3), G.f_vat,
    "our VAT number is", "vat_id", False, True)
ent("EU", "ES CIF", None, G.g_cif, G.n_vat(lambda w: G.cif.is_valid(w), 2), G.f_plain,
    "nuestro CIF es", "cif", True, True)
ent("IN", "Aadhaar", ["IN_AADHAAR"], G.g_aadhaar, G.n_aadhaar, G.f_aadhaar, "my Aadhaar number is", "aadhaar", False, True)
ent("IN", "PAN", ["IN_PAN"], G.g_pan, G.n_pan, G.f_plain, "my PAN is", "pan", False, False)
ent("IN", "GSTIN", None, G.g_gstin, G.n_gstin, G.f_plain, "our GSTIN is", "gstin", False, True)
ent("APAC", "AU TFN", ["AU_TFN"], G.g_tfn, G.n_tfn, G.f_3_3_3, "my tax file number is", "tax_file_number", True, True)
ent("APAC", "AU Medicare", ["AU_MEDICARE"], G.g_medicare, G.n_medicare, G.f_medicare, "my Medicare card number is",
    "medicare_number", True, True)
ent("APAC", "SG NRIC/FIN", ["SG_NRIC_FIN"], G.g_nric, G.n_nric, G.f_plain, "my NRIC is", "nric", False, True)
ent("APAC", "KR RRN", ["KR_RRN"], G.g_rrn, G.n_rrn, G.f_rrn, "my resident registration number is",
    "resident_registration_number", False, True)
ent("APAC", "JP My Number", None, G.g_mynumber, G.n_mynumber, G.f_4_4_4, "my My Number is", "my_number", True, True)
for kind, c in G.CRED.items():
    E.append(dict(family="credentials", entity=kind, group=c["group"], ptypes=None, gen=c["gen"], near=c["near"],
                  form=G.f_plain, phrase={"SECRET_ASSIGNMENT": "the new password:",
                                          "AWS_SECRET_ACCESS_KEY": "the AWS secret access key is"}.get(kind, "the key is"),
                  key=c["name"].lower(), needs_ctx=c["needs_name"], checksum=False, cred=True))

NEUTRAL = ("the value on the form is", "value")
NEG_KEY = ("the build reference is", "build_ref")


def make_texts(e, n, r):
    """Labelled texts of one entity: (kind, text, span or None)."""
    out = []
    n_noctx = 0 if e["entity"] in ("SECRET_ASSIGNMENT", "URL_CREDENTIALS", "AWS_SECRET_ACCESS_KEY") else math.ceil(n / 4)
    for i in range(n + n_noctx):
        ctx = i < n
        v = e["gen"](r)
        surface = e["form"](r, v, ctx)
        phrase, key = (e["phrase"], e["key"]) if ctx else NEUTRAL
        text, _ = G.place(G.FORMATS[i % 5], surface, key, phrase)
        out.append(("pos" if ctx else "pos_noctx", text, G.locate(text, surface, 0)))
    digits = sum(ch.isdigit() for ch in e["gen"](r)) or 12
    for i in range(n):
        fmt = G.FORMATS[i % 5]
        if i % 2 == 0:  # near miss, in the places of the valid values
            v = e["gen"](r)
            surface = e["form"](r, e["near"](r, v), True)
            if e.get("cred") and not e["needs_ctx"]:
                phrase, key = NEG_KEY
            else:
                phrase, key = e["phrase"], e["key"]
            text, _ = G.place(fmt, surface, key, phrase)
            out.append(("near", text, None))
        else:
            v, key, phrase = G.lookalike(r, digits)
            text, _ = G.place(fmt, v, key, phrase)
            out.append(("lookalike", text, None))
    return out


def merge(spans):
    spans = sorted(tuple(s) for s in spans)
    out = []
    for a, b in spans:
        if out and a < out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def score(spans, label):
    """(hit, false positives) of merged spans against the labelled span."""
    hit, fp = False, 0
    for a, b in merge(spans):
        if label and a < label[1] and label[0] < b:
            hit = True
        else:
            fp += 1
    return hit, fp


def run_pack(binary, tmp, name, texts):
    lic = ["--license", f"{DEMO}/license.hxlic", "--issuer-keys", f"{DEMO}/issuer-keys"]
    data = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    t0 = time.perf_counter()
    p = subprocess.run([binary, "run", "--pack", f"{tmp}/{name}.hxpack", *lic, "--jsonl"],
                       input=data, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"detection-bench: helixor-pack run on {name} failed:\n{p.stderr[-2000:]}")
    out = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    if len(out) != len(texts):
        sys.exit(f"detection-bench: {name}: {len(texts)} texts in, {len(out)} decisions out")
    return out, wall


def presidio_engine():
    import spacy
    from spacy.language import Language
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.nlp_engine import SpacyNlpEngine
    from presidio_analyzer import predefined_recognizers as pr

    @Language.component("hx_lower_lemma")
    def lower_lemma(doc):
        # A blank pipeline has no lemmatizer; Presidio's context enhancer
        # reads lemmas, so give it the lower-cased words.
        for t in doc:
            t.lemma_ = t.lower_
        return doc

    class BlankSpacyEngine(SpacyNlpEngine):
        def load(self):
            nlp = spacy.blank("en")
            nlp.add_pipe("hx_lower_lemma")
            self.nlp = {"en": nlp}

    engine = BlankSpacyEngine(models=[{"lang_code": "en", "model_name": "blank"}])
    engine.load()
    registry = RecognizerRegistry(supported_languages=["en"])
    names = ["CreditCardRecognizer", "UsBankRecognizer", "AbaRoutingRecognizer", "UsItinRecognizer",
             "UsPassportRecognizer", "UsSsnRecognizer", "IbanRecognizer", "NhsRecognizer", "UkNinoRecognizer",
             "EsNifRecognizer", "EsNieRecognizer", "ItFiscalCodeRecognizer", "ItVatCodeRecognizer",
             "PlPeselRecognizer", "InAadhaarRecognizer", "InPanRecognizer", "AuTfnRecognizer",
             "AuMedicareRecognizer", "SgFinRecognizer", "KrRrnRecognizer"]
    missing = [n for n in names if not hasattr(pr, n)]
    if missing:
        sys.exit(f"detection-bench: presidio-analyzer lacks {missing}")
    for n in names:
        registry.add_recognizer(getattr(pr, n)(supported_language="en"))
    return AnalyzerEngine(registry=registry, nlp_engine=engine, supported_languages=["en"])


def fmt_r(hit, n):
    return "n/a" if n == 0 else f"{hit / n:.3f}"


def fmt_p(tp, fp):
    return "n/a" if tp + fp == 0 else f"{tp / (tp + fp):.3f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=1000, help="valid values (with context) per entity; "
                    "as many negatives, a quarter as many without context (default 1000)")
    ap.add_argument("--min-recall-file", help="JSON {family: floor} of recall (with context) to enforce")
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--runs", type=int, default=5, metavar="N",
                    help="runs of our binary per family, interleaved with shares of Presidio's texts; "
                         "a text's engine time is the mean of its runs (default 5)")
    ap.add_argument("--binary", default=os.environ.get("HELIXOR_PACK", os.path.join(ROOT, "target", "release", "helixor-pack")))
    ap.add_argument("--json-out", help="write the per-entity figures here")
    ap.add_argument("--show-errors", type=int, default=0, metavar="N",
                    help="print up to N misses and N false positives of ours per entity (to stderr)")
    a = ap.parse_args()
    if a.runs < 1:
        sys.exit("detection-bench: --runs must be at least 1")
    if not os.access(a.binary, os.X_OK):
        sys.exit(f"detection-bench: no helixor-pack binary at {a.binary} (set HELIXOR_PACK or --binary)")
    floors = {}
    if a.min_recall_file:
        with open(a.min_recall_file) as f:
            floors = json.load(f)
        bad = set(floors) - set(FAMILY_PACK)
        if bad:
            sys.exit(f"detection-bench: unknown families in {a.min_recall_file}: {sorted(bad)}")

    r = random.Random(a.seed)
    for e in E:
        e["texts"] = make_texts(e, a.sample, r)

    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        lic = ["--license", f"{DEMO}/license.hxlic", "--issuer-keys", f"{DEMO}/issuer-keys"]
        for fam, pack in FAMILY_PACK.items():
            with open(os.path.join(ROOT, "packs", f"{pack}.yaml")) as f:
                y = f.read().replace(f"pack_id: catalog.{pack}.v1", f"pack_id: compliance.{pack}_bench.v1")
            with open(f"{tmp}/{pack}.yaml", "w") as f:
                f.write(y)
            c = subprocess.run([a.binary, "compile", "--playbook", f"{tmp}/{pack}.yaml", *lic,
                                "--out", f"{tmp}/{pack}.hxpack"], capture_output=True, text=True)
            if c.returncode != 0:
                sys.exit(f"detection-bench: compiling {pack} failed:\n{c.stderr[-2000:]}")
        # Each family's texts go through our binary `--runs` times, each run
        # a fresh process, with a share of Presidio's texts between two runs:
        # both sides then run under the same load (the machines are shared),
        # and a text's engine time is the mean of its runs (one run of our
        # family takes well under a second, so a single burst of another
        # job's work could move it by a third). Every run must decide alike.
        analyzer = presidio_engine()
        fam_wall, p_wall = {}, {}
        for fam, pack in FAMILY_PACK.items():
            es = [e for e in E if e["family"] == fam]
            texts = [t for e in es for (_, t, _) in e["texts"]]
            p_es = [e for e in es if e["ptypes"]]
            ftypes = sorted({t for e in p_es for t in e["ptypes"]})
            p_items = [(e, k, t) for e in p_es for k, (_, t, _) in enumerate(e["texts"])]
            for e in p_es:
                e["presidio"] = [None] * len(e["texts"])
            share = -(-len(p_items) // a.runs)
            lat = [0.0] * len(texts)
            first = None
            walls, pn, pt = [], 0, 0.0
            for run in range(a.runs):
                out, wall = run_pack(a.binary, tmp, pack, texts)
                walls.append(wall)
                spans = [[s for t in d.get("triggers", []) for s in t.get("spans", [])] for d in out]
                decided = [(d.get("action"), d.get("receipt_hash"), sp) for d, sp in zip(out, spans)]
                if first is None:
                    first, first_decided = spans, decided
                elif decided != first_decided:
                    sys.exit(f"detection-bench: {pack}: run {run + 1} decided differently from run 1")
                for i, d in enumerate(out):
                    lat[i] += d.get("latency_us", 0.0) / a.runs
                for e, k, t in p_items[run * share:(run + 1) * share]:
                    t0 = time.perf_counter()
                    res = analyzer.analyze(text=t, language="en", entities=ftypes)
                    dt = time.perf_counter() - t0
                    pt += dt
                    pn += 1
                    e["presidio"][k] = ([(x.start, x.end, x.entity_type, x.score) for x in res], dt)
            fam_wall[fam] = (len(texts), sum(walls) / len(walls))
            if pn:
                p_wall[fam] = (pn, pt)
            i = 0
            for e in es:
                e["ours"] = []
                for _ in e["texts"]:
                    e["ours"].append((first[i], lat[i]))
                    i += 1

    def tally(e, system, thr=0.0):
        s = dict(pos=0, hit=0, pos_nc=0, hit_nc=0, tp=0, fp=0, time=0.0, n=0)
        for (kind, _, label), res in zip(e["texts"], e[system]):
            found, dt = res
            if system == "ours":
                spans_all, spans_tp = found, found
                s["time"] += dt / 1e6
            else:
                spans_all = [(x[0], x[1]) for x in found if x[3] >= thr]
                spans_tp = [(x[0], x[1]) for x in found if x[3] >= thr and x[2] in e["ptypes"]]
                s["time"] += dt
            s["n"] += 1
            hit, _ = score(spans_tp, label)
            _, fp = score(spans_all, label)
            if kind == "pos":
                s["pos"] += 1
                s["hit"] += hit
            elif kind == "pos_noctx":
                s["pos_nc"] += 1
                s["hit_nc"] += hit
            s["tp"] += hit
            s["fp"] += fp
        return s

    def add(acc, s):
        for k, v in s.items():
            acc[k] = acc.get(k, 0) + v
        return acc

    if a.show_errors:
        for e in E:
            miss, fps = [], []
            for (kind, t, label), (spans, _) in zip(e["texts"], e["ours"]):
                hit, fp = score(spans, label)
                if kind == "pos" and not hit:
                    miss.append(t)
                if fp:
                    fps.append((kind, t, spans))
            for t in miss[:a.show_errors]:
                print(f"MISS {e['entity']}: {t!r}", file=sys.stderr)
            for kind, t, spans in fps[:a.show_errors]:
                print(f"FP   {e['entity']} ({kind}): {t!r} {spans}", file=sys.stderr)

    res = []
    for e in E:
        row = dict(family=e["family"], entity=e.get("group", e["entity"]), kind=e["entity"],
                   supported=bool(e["ptypes"]), checksum=e["checksum"],
                   ours=tally(e, "ours"))
        if e["ptypes"]:
            row["presidio"] = tally(e, "presidio")
            row["presidio05"] = tally(e, "presidio", 0.5)
        res.append(row)

    # Credentials are reported per kind group (one hard rule each).
    grouped = []
    for row in res:
        if grouped and grouped[-1]["family"] == row["family"] and grouped[-1]["entity"] == row["entity"]:
            g = grouped[-1]
            add(g["ours"], row["ours"])
            g["kinds"] += 1
        else:
            grouped.append(dict(row, ours=dict(row["ours"]), kinds=1))

    load = open("/proc/loadavg").read().split()[:3]
    print(f"detection-bench: seed {a.seed}, --sample {a.sample}, --runs {a.runs}, {sum(len(e['texts']) for e in E)} texts, "
          f"{os.cpu_count()} CPUs, load {' '.join(load)}")
    print(f"presidio-analyzer {md.version('presidio-analyzer')}, python-stdnum {md.version('python-stdnum')}, "
          f"spaCy {md.version('spacy')} (blank en)\n")
    hdr = ("| family | entity | pos / no-ctx / neg | ours recall | ours recall no ctx | ours precision "
           "| Presidio recall | Presidio recall no ctx | Presidio precision | Presidio ≥0.5 R / P "
           "| ours texts/s | Presidio texts/s |")
    print(hdr)
    print("|---" * 12 + "|")

    def line(fam, name, o, p, p5, ntexts):
        cells = [fam, name, f"{o['pos']} / {o['pos_nc']} / {o['n'] - o['pos'] - o['pos_nc']}",
                 fmt_r(o["hit"], o["pos"]), fmt_r(o["hit_nc"], o["pos_nc"]), fmt_p(o["tp"], o["fp"])]
        if p:
            cells += [fmt_r(p["hit"], p["pos"]), fmt_r(p["hit_nc"], p["pos_nc"]), fmt_p(p["tp"], p["fp"]),
                      f"{fmt_r(p5['hit'], p5['pos'])} / {fmt_p(p5['tp'], p5['fp'])}"]
        else:
            cells += ["not supported", "", "", ""]
        cells.append(f"{o['n'] / o['time']:,.0f}" if o["time"] else "")
        cells.append(f"{p['n'] / p['time']:,.0f}" if p and p["time"] else "")
        print("| " + " | ".join(cells) + " |")

    summary = {}
    for fam in FAMILY_PACK:
        for g in grouped:
            if g["family"] == fam:
                name = g["entity"] + (f" ({g['kinds']} kinds)" if g["kinds"] > 1 else "")
                line(fam, name, g["ours"], g.get("presidio"), g.get("presidio05"), None)
        fo = {}
        fp_, fp5, fo_sup = {}, {}, {}
        for row in res:
            if row["family"] == fam:
                add(fo, row["ours"])
                if row["supported"]:
                    add(fp_, row["presidio"])
                    add(fp5, row["presidio05"])
                    add(fo_sup, row["ours"])
        summary[fam] = dict(ours=fo, presidio=fp_, presidio05=fp5, ours_supported=fo_sup)
    print()
    print("| family | ours recall | ours precision | ours texts/s (process wall) | ours texts/s (engine) "
          "| ours on Presidio's entities R / P | Presidio R / P | Presidio ≥0.5 R / P | Presidio texts/s "
          "| speed ratio (wall / engine) |")
    print("|---" * 10 + "|")
    tot = {k: {} for k in ("ours", "presidio", "presidio05", "ours_supported")}

    def same_tps(osup):
        # Our engine's texts/s on the texts Presidio also ran (its entities
        # only): credentials, which it does not detect and which cost us the
        # most, are left out of both sides.
        return osup["n"] / osup["time"] if osup.get("time") else 0.0

    for fam, s in summary.items():
        n, wall = fam_wall[fam]
        o, p, p5, osup = s["ours"], s["presidio"], s["presidio05"], s["ours_supported"]
        for k in tot:
            add(tot[k], s[k])
        ours_tps = n / wall
        eng_tps = o["n"] / o["time"]
        cells = [fam, fmt_r(o["hit"], o["pos"]), fmt_p(o["tp"], o["fp"]), f"{ours_tps:,.0f}", f"{eng_tps:,.0f}"]
        if p:
            pn, pt = p_wall[fam]
            cells += [f"{fmt_r(osup['hit'], osup['pos'])} / {fmt_p(osup['tp'], osup['fp'])}",
                      f"{fmt_r(p['hit'], p['pos'])} / {fmt_p(p['tp'], p['fp'])}",
                      f"{fmt_r(p5['hit'], p5['pos'])} / {fmt_p(p5['tp'], p5['fp'])}",
                      f"{pn / pt:,.0f}", f"{ours_tps / (pn / pt):,.0f}× / {same_tps(osup) / (pn / pt):,.0f}×"]
        else:
            cells += ["not supported", "", "", "", ""]
        print("| " + " | ".join(cells) + " |")
    n_all = sum(v[0] for v in fam_wall.values())
    w_all = sum(v[1] for v in fam_wall.values())
    pn_all = sum(v[0] for v in p_wall.values())
    pt_all = sum(v[1] for v in p_wall.values())
    o, p, p5, osup = tot["ours"], tot["presidio"], tot["presidio05"], tot["ours_supported"]
    print("| **all** | " + " | ".join([
        fmt_r(o["hit"], o["pos"]), fmt_p(o["tp"], o["fp"]), f"{n_all / w_all:,.0f}", f"{o['n'] / o['time']:,.0f}",
        f"{fmt_r(osup['hit'], osup['pos'])} / {fmt_p(osup['tp'], osup['fp'])}",
        f"{fmt_r(p['hit'], p['pos'])} / {fmt_p(p['tp'], p['fp'])}",
        f"{fmt_r(p5['hit'], p5['pos'])} / {fmt_p(p5['tp'], p5['fp'])}",
        f"{pn_all / pt_all:,.0f}",
        f"{(n_all / w_all) / (pn_all / pt_all):,.0f}× / {same_tps(osup) / (pn_all / pt_all):,.0f}×"]) + " |")
    print("\nRecall: valid values with context words (\"no ctx\": the same without them). Precision: all "
          "detections on the positive and negative texts of the entity (overlapping spans merged). Per-entity "
          "texts/s: ours from the decisions' latency_us (engine time; each text's mean over the runs), Presidio from "
          "the time of each analyze() call; per-family texts/s: ours the mean wall time of the whole `run --jsonl` "
          "process (start, license, JSON in and out), Presidio the sum of its analyze() calls. Our runs of a family "
          "alternate with shares of Presidio's texts, so both sides run under the same load. Speed ratio: process wall over every text of the family; "
          "engine over the texts of the entities both detect (the same texts on both sides, so the all row leaves "
          "out credentials, which Presidio does not detect).")

    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(dict(rows=[{k: v for k, v in g.items()} for g in grouped], summary=summary), f, indent=1)
    broken = []
    for fam, floor in floors.items():
        o = summary[fam]["ours"]
        rec = o["hit"] / o["pos"] if o["pos"] else 0.0
        if rec < floor:
            broken.append(f"{fam}: recall {rec:.3f} < floor {floor}")
    if broken:
        print("\ndetection-bench: recall floor broken: " + "; ".join(broken), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
