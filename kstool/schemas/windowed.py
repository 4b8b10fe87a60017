"""Kafka Streams' windowed keys around any key format, as `consume` shows them and `produce`
writes them back: `windowed:FMT` is TimeWindowedSerde (key ‖ window start, 8 bytes) as
{"key", "start"}; `session:FMT` is SessionWindowedSerde (key ‖ end ‖ start) as {"key",
"start", "end"}. A key that does not fit its layout becomes {"error", "hex"} in its place and is
counted, never a key cut at the wrong byte."""

from __future__ import annotations

import json
from typing import Any, Callable

from kstool.base.serdes import EncodeError, FieldEncoder, WithSchemaId, is_raw, unraw
from kstool.stores.window import usable_window_time
from kstool.stores.windowed_keys import output_key, windowed_key_bounds

LAYOUTS = {"windowed": "time-windowed", "session": "session-windowed"}


def split_format(fmt: str) -> tuple[str | None, str]:
    """`windowed:string` -> ("windowed", "string"); a plain format -> (None, format)."""
    prefix, sep, inner = fmt.partition(":")
    return (prefix, inner) if sep and prefix in LAYOUTS else (None, fmt)


class WindowedDecoder:
    def __init__(self, layout: str, inner: Callable[[bytes | None], Any]):
        self.layout, self.inner, self.misfits = layout, inner, 0

    @property
    def failures(self) -> int:
        return self.misfits + getattr(self.inner, "failures", 0)

    def __call__(self, data: bytes | None) -> Any:
        if data is None:
            return None
        window = _window(self.layout, data)
        if window is None:
            self.misfits += 1
            return {"error": f"key: {len(data)} bytes that do not end in a {LAYOUTS[self.layout]} key's "
                             f"window times", "hex": data.hex()}
        key, bounds = window
        inner = self.inner(key)
        if isinstance(inner, WithSchemaId):
            return WithSchemaId({"key": inner.value, **bounds}, inner.schema_id)
        return {"key": inner, **bounds}


def _window(layout: str, data: bytes) -> tuple[bytes, dict[str, int]] | None:
    bounds = windowed_key_bounds("time-windowed" if layout == "windowed" else "session", data)
    if bounds is None:
        return None
    key, start, end, _ = bounds
    return key, ({"start": start} if end is None else {"start": start, "end": end})


def _time(value: Any, name: str) -> int | None:
    found = value.get(name) if isinstance(value, dict) else None
    ok = isinstance(found, int) and not isinstance(found, bool) and usable_window_time(found)
    return found if ok else None


def windowed_encoder(layout: str, inner: FieldEncoder) -> FieldEncoder:
    """{"key", "start"[, "end"]} (or its JSON text) -> the windowed key's bytes."""
    session = layout == "session"
    shape = '{"key": ..., "start": MS' + (', "end": MS}' if session else "}")

    def encode(value: Any, schema_id: int | None) -> bytes | None:
        if value is None:
            return None
        if is_raw(value):
            return unraw(value)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        start, end = _time(value, "start"), _time(value, "end") if session else 0
        if start is None or end is None or "key" not in value:
            raise EncodeError(f"a {LAYOUTS[layout]} key is {shape}, got {str(value)[:60]!r}")
        if session and end < start:
            raise EncodeError(f"a session ends at or after its start, got start {start} and end {end}")
        key = inner(value["key"], schema_id)
        if key is None:
            raise EncodeError(f"a {LAYOUTS[layout]} key needs a non-null \"key\"")
        return output_key(key, start, end, session, "windowed")
    return encode
