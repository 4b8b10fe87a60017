"""A JSON field of a record's value, by dot path, as the processors read it (the engine reads
fields in Spark; processors read them where only the stored bytes are at hand)."""

from __future__ import annotations

import json
from typing import Any


def json_field(value: bytes, path: str) -> Any:
    """The field at `path` (a.b.c) of a JSON value; None when it is not there, or the value is
    not JSON."""
    try:
        found = json.loads(value)
    except ValueError:
        return None
    for part in path.split("."):
        found = found.get(part) if isinstance(found, dict) else None
    return found


def field_text(value: bytes, path: str) -> bytes | None:
    """The field as a key: a string as it is, anything else as its JSON."""
    found = json_field(value, path)
    if found is None:
        return None
    return (found if isinstance(found, str) else json.dumps(found, separators=(",", ":"))).encode()
