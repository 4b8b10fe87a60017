"""A record's headers as the processors carry them: as Arrow gives them ([{"key": str, "value":
bytes | None}]), or None for none. Processors pass them on untouched, as Kafka Streams forwards a
record's context; a store entry that waits for a later output (a buffered stream record) keeps
them as its aux text."""

from __future__ import annotations

import base64
import json
from typing import Any

Headers = list[dict[str, Any]] | None


def stored_headers(headers: Headers) -> str:
    """The headers as a store entry's aux ("" for none)."""
    if not headers:
        return ""
    return json.dumps([[h["key"], None if h["value"] is None else base64.b64encode(h["value"]).decode()]
                       for h in headers])


def headers_of(aux: str) -> Headers:
    """stored_headers' headers back (None for none)."""
    if not aux:
        return None
    return [{"key": key, "value": None if value is None else base64.b64decode(value)} for key, value in json.loads(aux)]
