"""An independent check of the decision log of SPEC §19, written from
RFC 9162 §2.1 and the C2SP signed-note, tlog-checkpoint and tlog-proof
specifications (not from the Rust code): it recomputes a log's Merkle root
from its lines, opens a checkpoint note with the signer's Ed25519 public key
(the `cryptography` package) and verifies a `tlog-proof` of one line.

    tlog_model.py root LOG...                 # base64 root of the lines, in file order
    tlog_model.py proof PROOF LOG... --key PUB --name NAME --seq N
"""

import argparse
import base64
import hashlib
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def leaf(line: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + line).digest()


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def mth(leaves):
    """RFC 9162 §2.1.1 MTH over leaf hashes, by its recursive definition."""
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return leaves[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return node(mth(leaves[:k]), mth(leaves[k:]))


def read_lines(paths):
    out = []
    for p in paths:
        with open(p, "rb") as f:
            data = f.read()
        assert data == b"" or data.endswith(b"\n"), f"{p}: torn last line"
        out += data.split(b"\n")[:-1]
    return out


def open_note(note: str, name: str, public: bytes) -> str:
    """The text of a signed note, checked with the key `name`/`public`."""
    i = note.rindex("\n\n")
    text, sigs = note[: i + 1], note[i + 2 :]
    key_id = hashlib.sha256(name.encode() + b"\n" + b"\x01" + public).digest()[:4]
    key = Ed25519PublicKey.from_public_bytes(public)
    for line in sigs.splitlines():
        assert line.startswith("\u2014 "), f"malformed signature line {line!r}"
        who, b64 = line[2:].rsplit(" ", 1)
        raw = base64.b64decode(b64, validate=True)
        if who == name and raw[:4] == key_id:
            key.verify(raw[4:], text.encode())  # raises on a bad signature
            return text
    raise AssertionError(f"no signature by {name}")


def checkpoint(text: str):
    origin, size, root = text.split("\n")[:3]
    return origin, int(size), base64.b64decode(root, validate=True)


def verify_inclusion(leaf_hash, index, size, path, root):
    """RFC 9162 §2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf_hash
    for p in path:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            r = node(p, r)
            if fn % 2 == 0:
                while fn % 2 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["root", "proof"])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--key")
    ap.add_argument("--name")
    ap.add_argument("--seq", type=int)
    a = ap.parse_args()
    if a.cmd == "root":
        print(base64.b64encode(mth([leaf(l) for l in read_lines(a.files)])).decode())
        return
    proof_path, logs = a.files[0], a.files[1:]
    with open(proof_path, encoding="utf-8") as f:
        proof = f.read()
    head, note = proof.split("\n\n", 1)
    lines = head.split("\n")
    assert lines[0] == "c2sp.org/tlog-proof@v1", lines[0]
    rest = [l for l in lines[1:] if not l.startswith("extra ")]
    assert rest[0].startswith("index "), rest[0]
    index = int(rest[0][len("index ") :])
    path = [base64.b64decode(h, validate=True) for h in rest[1:]]
    with open(a.key, encoding="utf-8") as f:
        public = base64.b64decode(f.read().strip(), validate=True)
    origin, size, root = checkpoint(open_note(note, a.name, public))
    assert origin == a.name, origin
    entries = read_lines(logs)
    assert index == a.seq, (index, a.seq)
    assert mth([leaf(l) for l in entries[:size]]) == root, "the log's root differs from the checkpoint's"
    ok = verify_inclusion(leaf(entries[index]), index, size, path, root)
    assert ok, f"the inclusion proof of entry {index} does not verify"
    # The same proof must fail for any other line.
    other = (index + 1) % size
    if other != index:
        assert not verify_inclusion(leaf(entries[other]), index, size, path, root)
    print(f"entry {index} of {size}: proof and signature verify")


if __name__ == "__main__":
    sys.exit(main())
