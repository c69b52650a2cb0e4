"""The Python side of the typed-client conformance run (scripts/sdk-e2e.py):
drives the clients generated from the demo packs over a corpus and writes,
one JSON object per line, every decision as the typed objects hold it.

Usage: python conformance.py BASE_URL CORPUS_FILE (with the generated
package importable)."""

from __future__ import annotations

import enum
import json
import sys
from typing import Any, Dict, List, Optional, Union

import helixor_clients
from helixor_clients import HelixorError

CLIENTS = {c.PACK_ID: c for c in (getattr(helixor_clients, n) for n in helixor_clients.__all__)
           if isinstance(c, type) and hasattr(c, "PACK_ID")}


def raw(v: Union[enum.Enum, str, None]) -> Optional[str]:
    """The wire string of an enum member or a kept unknown string."""
    if v is None:
        return None
    return v.value if isinstance(v, enum.Enum) else v


def written(d: Any) -> Dict[str, Any]:
    """The typed decision written back with the server's member names."""
    return {
        "action": raw(d.action),
        "severity": raw(d.severity),
        "reason": d.reason,
        "clean_text": d.clean_text,
        "triggers": [{
            "rule_id": raw(t.rule_id), "source": t.source, "severity": raw(t.severity),
            "action": raw(t.action), "codons": t.codons, "match_count": t.match_count,
            "spans": [list(s) for s in t.spans],
        } for t in d.triggers],
        "invariants_passed": d.invariants_passed,
        "pack_id": d.pack_id,
        "pack_version": d.pack_version,
        "receipt_hash": d.receipt_hash,
        "latency_us": d.latency_us,
        "generation": d.generation,
        "normalized": d.normalized,
        "blocked": d.blocked,
        "redacted": d.redacted,
        "action_known": isinstance(d.action, enum.Enum),
        "rule_ids_known": [isinstance(t.rule_id, enum.Enum) for t in d.triggers],
    }


def main(base_url: str, corpus_file: str) -> None:
    with open(corpus_file, encoding="utf-8") as f:
        corpus = json.load(f)
    token = corpus.get("token")
    clients = {pid: cls(base_url, token=token, timeout=30.0) for pid, cls in CLIENTS.items()}
    out: List[Dict[str, Any]] = []
    for i, c in enumerate(corpus["cases"]):
        d = clients[c["pack_id"]].evaluate(c["text"], c.get("normalize"))
        out.append({"kind": "case", "i": i, "decision": written(d)})
    for i, b in enumerate(corpus["batches"]):
        ds = clients[b["pack_id"]].evaluate_batch(b["texts"])
        out.append({"kind": "batch", "i": i, "decisions": [written(d) for d in ds]})
    for i, e in enumerate(corpus["errors"]):
        client = CLIENTS[e["pack_id"]](e.get("base_url") or base_url, token=e.get("token"), timeout=30.0)
        try:
            client.evaluate(e["text"])
            out.append({"kind": "error", "i": i, "name": None})
        except HelixorError as err:
            out.append({"kind": "error", "i": i, "name": err.name, "status": err.status,
                        "message": err.message})
    for i, u in enumerate(corpus["unknown"]):
        module = sys.modules[CLIENTS[u["pack_id"]].__module__]
        d = module.Decision.from_json(u["decision"])  # type: ignore[attr-defined]
        out.append({"kind": "unknown", "i": i, "decision": written(d)})
    for line in out:
        print(json.dumps(line, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
