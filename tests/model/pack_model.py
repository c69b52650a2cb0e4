# An independent implementation of [§1](docs/formats.md#s1)-[§3](docs/formats.md#s3) in Python (cryptography,
# PyYAML): canonical JSON, license signatures, and the .hxpack container.
# scripts/interop.sh uses it to open packs that helixor-pack sealed, to seal
# packs and sign licenses that helixor-pack must accept.
import base64, datetime, hashlib, json, os, struct, sys
import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives import hashes

def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

def pack_key(content_key):
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"helixor.hxpack.v1").derive(content_key)

def verify_license(lic, pub_b64):
    body = {k: v for k, v in lic.items() if k != "signature"}
    Ed25519PublicKey.from_public_bytes(base64.b64decode(pub_b64)).verify(base64.b64decode(lic["signature"]), canonical(body))

def open_pack(data, lic):
    assert data[:4] == b"HXPK", "magic"
    version, n = struct.unpack(">HH", data[4:8])
    assert version == 1, version
    pack_id = data[8:8 + n].decode()
    nonce, digest, ct = data[8 + n:20 + n], data[20 + n:52 + n], data[52 + n:]
    aad = f"{pack_id}:{lic['license_id']}".encode()
    plain = AESGCM(pack_key(base64.b64decode(lic["content_key"]))).decrypt(nonce, ct, aad)
    assert hashlib.sha256(plain).digest() == digest, "digest"
    return pack_id, plain

def seal_pack(doc, lic):
    plain = canonical(doc)
    pack_id = doc["pack_id"].encode()
    nonce = os.urandom(12)
    aad = doc["pack_id"].encode() + b":" + lic["license_id"].encode()
    ct = AESGCM(pack_key(base64.b64decode(lic["content_key"]))).encrypt(nonce, plain, aad)
    return b"HXPK" + struct.pack(">HH", 1, len(pack_id)) + pack_id + nonce + hashlib.sha256(plain).digest() + ct

def issue_license(key_id, out_license, out_pub_dir):
    sk = Ed25519PrivateKey.generate()
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    pub = base64.b64encode(sk.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    lic = {
        "format": "helixor.license.v1", "license_id": "lic_python_0001", "licensee": "Pythön Corp",
        "tier": "ENTERPRISE", "issued_at": now.isoformat(),
        "not_before": (now - datetime.timedelta(days=1)).isoformat(),
        "not_after": (now + datetime.timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%S.250+02:00"),
        "licensed_packs": ["custom.*", "compliance.*"], "licensed_solvers": [], "features": [],
        "content_key": base64.b64encode(os.urandom(32)).decode(), "issuer_key_id": key_id,
        "x_extra": {"seats": 5, "ratio": 0.5},
    }
    lic["signature"] = base64.b64encode(sk.sign(canonical(lic))).decode()
    json.dump(lic, open(out_license, "w"), ensure_ascii=False, indent=2)
    open(os.path.join(out_pub_dir, key_id + ".pub"), "w").write(pub + "\n")

if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "open":      # open PACK LICENSE PUBFILE PLAYBOOK: checks every layer, prints the pack id
        data = open(sys.argv[2], "rb").read()
        lic = json.load(open(sys.argv[3]))
        verify_license(lic, open(sys.argv[4]).read().strip())
        pack_id, plain = open_pack(data, lic)
        expected = canonical(yaml.safe_load(open(sys.argv[5])))
        assert plain == expected, "plaintext is not the playbook's canonical JSON"
        print(pack_id)
    elif cmd == "seal":    # seal PLAYBOOK LICENSE OUT
        lic = json.load(open(sys.argv[3]))
        open(sys.argv[4], "wb").write(seal_pack(yaml.safe_load(open(sys.argv[2])), lic))
    elif cmd == "issue":   # issue KEY_ID LICENSE_OUT PUB_DIR
        issue_license(sys.argv[2], sys.argv[3], sys.argv[4])
