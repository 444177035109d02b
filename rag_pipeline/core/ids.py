"""Deterministic ids: the same input always gives the same id, so re-ingesting never duplicates."""

import hashlib
import json
from typing import Any


def stable_id(*parts: str | int) -> str:
    """A 32-hex-digit id from its parts (unambiguous: parts are length-prefixed)."""
    digest = hashlib.sha256()
    for part in parts:
        encoded = str(part).encode("utf-8", "surrogatepass")
        digest.update(len(encoded).to_bytes(8, "big"))
        digest.update(encoded)
    return digest.hexdigest()[:32]


def content_hash(meta: dict[str, Any], body: str) -> str:
    """The sha256 of a stage record: its JSON metadata (keys sorted) and its text."""
    digest = hashlib.sha256()
    digest.update(json.dumps(meta, sort_keys=True, ensure_ascii=True, default=str).encode())
    digest.update(b"\x00")
    digest.update(body.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()
