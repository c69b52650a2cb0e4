# An independent model of [§6](docs/evaluation.md#s6) in Python (`re`). Its evaluate() produced
# the golden cases of tests/cases/; scripts/differential.sh uses it to check
# `helixor-pack run --jsonl` on thousands of generated texts.
# Known, intended differences (the contract is Rust's regex crate): under
# IGNORECASE Python's [a-z] also matches 'İ' and 'ı'; Python's \b treats
# combining marks and ZERO WIDTH JOINER as non-word characters. The text
# generator avoids both.
import re, json, hashlib, sys, yaml
D = '[0-9]'
CODONS = [
 ("PII_SSN_EXTRACT", r'\b(?!000|666|9[0-9]{2})[0-9]{3}-(?!00)[0-9]{2}-(?!0000)[0-9]{4}\b', 0, None, "[REDACTED_SSN]"),
 ("PII_CARD_EXTRACT", r'\b(?:[0-9]{4}[-\s]?){3}[0-9]{4}\b', 0, "luhn", "[REDACTED_CARD_PAN]"),
 ("PII_HEALTH_EXTRACT", r'\b(?:MRN|EHR|RX)[-:]?\s*[0-9]{6,10}\b', re.I, None, "[REDACTED_HEALTH_ID]"),
 ("PII_EMAIL_EXTRACT", r'\b[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9-.]+\b', re.I, None, "[REDACTED_EMAIL]"),
 ("PII_PHONE_EXTRACT", r'(?:\+?1[-.\s]?)?(?:\([2-9][0-9]{2}\)|[2-9][0-9]{2})[-.\s]?[0-9]{3}[-.\s]?[0-9]{4}\b', 0, None, "[REDACTED_PHONE]"),
 ("PII_IPV4_EXTRACT", r'\b(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\b', 0, None, "[REDACTED_IP]"),
]
HARD = [("RULE-GLBA-SSN-BLOCK",[0],"FATAL","block_glba_ssn_leakage","Statutory violation: Social Security Number (GLBA / FCRA) detected"),
 ("RULE-PCI-DSS-PAN-BLOCK",[1],"FATAL","block_pci_dss_pan_leakage","Statutory violation: Credit Card PAN (PCI-DSS Requirement 3) detected"),
 ("RULE-HIPAA-PHI-BLOCK",[2],"FATAL","block_hipaa_phi_leakage","Statutory violation: Protected Health Information (HIPAA) detected"),
 ("RULE-GDPR-CONTACT-REDACT",[3,4,5],"WARNING","redact_and_permit_contact_pii","Regulatory notice: Direct online/contact identifier requires in-place redaction prior to egress")]
def luhn(s):
    d=[int(c) for c in s if c in '0123456789']
    if len(d)<2: return False
    t=0
    for i,x in enumerate(reversed(d)):
        if i%2: x*=2; x = x-9 if x>9 else x
        t+=x
    return t%10==0
def finds(p, flags, text, check):
    out=[]
    for m in re.finditer(p, text, flags):
        if m.end()==m.start(): continue
        if check=="luhn" and not luhn(m.group()): continue
        out.append((m.start(), m.end()))
    return out
def evaluate(pb, text):
    rules = pb.get('rules') or []
    trig=[]; red=[]
    for r in rules:
        fl=0
        for f in r.get('flags') or []: fl|={'IGNORECASE':re.I,'MULTILINE':re.M,'DOTALL':re.S}[f]
        pat=r['pattern'].replace(r'\d','[0-9]')
        sp=finds(pat, fl, text, 'luhn' if r['type']=='luhn_checksum' else None)
        if not sp: continue
        sev='FATAL' if r['action']=='block' else 'WARNING'
        t={"rule_id":r['id'],"source":"rule","severity":sev,"action":f"{r['action']}_{r['id']}","match_count":len(sp),"spans":[list(x) for x in sp]}
        t['_reason']=r.get('description') or f"Custom rule {r['id']} matched"
        if sev=='WARNING': red += [(s,e,(len(trig),0),f"[REDACTED_{r['id'].upper()}]") for s,e in sp]
        trig.append(t)
    found=[finds(p,f,text,c) for (_,p,f,c,_) in CODONS]
    for hid,cods,sev,act,reason in HARD:
        sp=[]; codes=[]
        for c in cods:
            if found[c]:
                codes.append(CODONS[c][0]); sp+=found[c]
                if sev=='WARNING': red += [(s,e,(len(trig),c),CODONS[c][4]) for s,e in found[c]]
        if not sp: continue
        sp.sort()
        trig.append({"rule_id":hid,"source":"builtin","severity":sev,"action":act,"codons":codes,"match_count":len(sp),"spans":[list(x) for x in sp],"_reason":reason})
    dec = next((t for t in trig if t['severity']=='FATAL'), None) or next((t for t in trig if t['severity']=='WARNING'), None)
    if dec is None: action,sev,reason,clean='permit_clean_payload',None,None,text
    elif dec['severity']=='FATAL': action,sev,reason,clean=dec['action'],'FATAL',dec['_reason'],'[BLOCKED: Prohibited Content]'
    else:
        red.sort(key=lambda x:(x[0],-x[1],x[2])); out=''; pos=0; cur=None
        for s,e,_,ph in red:
            if cur and s<cur[1]: cur=(cur[0],max(cur[1],e),cur[2])
            else:
                if cur: out+=text[pos:cur[0]]+cur[2]; pos=cur[1]
                cur=(s,e,ph)
        if cur: out+=text[pos:cur[0]]+cur[2]; pos=cur[1]
        clean=out+text[pos:]; action,sev,reason=dec['action'],'WARNING',dec['_reason']
    ver = pb.get('version'); ver = '' if ver is None else (ver if isinstance(ver,str) else json.dumps(ver))
    inv = dec is None
    rec = {"schema":"helixor.decision_receipt.v1","pack_id":pb['pack_id'],"pack_version":ver,"action":action,"invariants_passed":inv,"rule_ids":[t['rule_id'] for t in trig],"sha256_payload":hashlib.sha256(text.encode()).hexdigest()}
    receipt="hx_proof_"+hashlib.sha256(json.dumps(rec,sort_keys=True,separators=(",",":")).encode()).hexdigest()[:24]
    for t in trig: del t['_reason']
    return {"action":action,"severity":sev,"reason":reason,"clean_text":clean,"triggers":trig,"invariants_passed":inv,"pack_version":ver,"receipt_hash":receipt}
if __name__ == '__main__':
    # usage: engine_model.py PLAYBOOK.yaml TEXTS.jsonl DECISIONS.jsonl
    # compares each decision of DECISIONS (helixor-pack run --jsonl output)
    # with the model's; prints the first mismatches and their count.
    pb = yaml.safe_load(open(sys.argv[1]))
    texts = [json.loads(l) for l in open(sys.argv[2], encoding='utf-8')]
    got = [json.loads(l) for l in open(sys.argv[3], encoding='utf-8')]
    assert len(texts) == len(got), (len(texts), len(got))
    fields = ["action", "severity", "reason", "clean_text", "triggers", "invariants_passed", "pack_version", "receipt_hash"]
    bad = 0
    for t, g in zip(texts, got):
        exp = evaluate(pb, t)
        diffs = [f for f in fields if exp[f] != g.get(f)]
        if diffs:
            bad += 1
            if bad <= 5:
                print("MISMATCH", json.dumps(t, ensure_ascii=False))
                for f in diffs:
                    print("  ", f, "model:", json.dumps(exp[f], ensure_ascii=False)[:300])
                    print("  ", " " * len(f), "got:  ", json.dumps(g.get(f), ensure_ascii=False)[:300])
    print(f"{sys.argv[1]}: {len(texts) - bad} of {len(texts)} decisions equal the model")
    sys.exit(1 if bad else 0)
