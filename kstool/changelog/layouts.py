"""Decoding changelog records: the key layouts (kstool.base.store_keys) around a key format, value
formats, and detecting both from a sample."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any, Callable

from kstool.base.errors import UsageError
from kstool.base.serdes import FORMATS, SCHEMA_FORMATS, WithSchemaId, raw
from kstool.changelog import fk_subscription, suppress_buffer
from kstool.schemas.formats import Schemas, record_decoder
from kstool.stores import SESSION_STORE, WINDOW_STORE
from kstool.stores.windowed_keys import TIME_WINDOWED_SUFFIX, time_windowed_start, windowed_key_bounds

# window and session: Kafka Streams' store keys (a changelog's); time-windowed: an aggregate's
# output keys (TimeWindowedSerializer: key ‖ start), read here as well
LAYOUTS = ("key-value", "window", "session", "time-windowed")
# timestamps a real window bound can take: 2000-01-01 .. 2100-01-01
_PLAUSIBLE = (946_684_800_000, 4_102_444_800_000)
KEY_FORMATS = (*FORMATS, *SCHEMA_FORMATS)
# the keys of kstool's buffer stores, a FORMAT key inside (`time-first:string`): shown as their parts
# time-first (a versioned join's stream buffer, Kafka Streams' TimeFirstWindowKeySchema): time(8) ‖ key ‖ seqnum(4)
# join-side (a stream-stream join's unmatched records, TimestampedKeyAndJoinSide): time(8) ‖ left(1) ‖ key ‖ seqnum(4)
BUFFER_KEYS = ("time-first", "join-side")
# the values of a suppression buffer (`buffered:long`): time it entered(8) ‖ present(1) ‖ FORMAT value
BUFFERED_VALUE = "buffered"
_TIME, _SEQNUM = struct.Struct(">q"), struct.Struct(">i")


@dataclass(frozen=True)
class KeySpec:
    layout: str  # key-value | window | session
    key_format: str

    @classmethod
    def parse(cls, text: str) -> "KeySpec":
        """`string`, `windowed:long`, `session:json`, `time-windowed:string`, ..."""
        prefix, sep, fmt = text.partition(":")
        if prefix in (*BUFFER_KEYS, fk_subscription.FORMAT_PREFIX) and fmt in KEY_FORMATS:  # keys that hold more
            return cls("key-value", text)
        if not sep:
            prefix, fmt = "key-value", text
        layout = {"windowed": "window", "window": "window", "session": "session",
                  "time-windowed": "time-windowed", "key-value": "key-value"}.get(prefix)
        if layout is None or fmt not in KEY_FORMATS:
            raise UsageError(f"invalid key format {text!r}: use FORMAT, windowed:FORMAT, session:FORMAT, "
                             f"time-windowed:FORMAT, time-first:FORMAT, join-side:FORMAT or subscription:FORMAT with FORMAT one of "
                             f"{', '.join(KEY_FORMATS)}")
        return cls(layout, fmt)


@dataclass
class DecodedKey:
    key: Any
    window_start: int | None = None
    window_end: int | None = None
    seqnum: int | None = None
    ok: bool = True


def _inner_decoder(fmt: str, schemas: Schemas | None, part: str) -> Callable[[bytes | None], Any]:
    """A format's decoder; a schema's value without its id (changelog rows do not show ids)."""
    decode = record_decoder(fmt, schemas, part)

    def inner(data: bytes | None) -> Any:
        value = decode(data)
        return value.value if isinstance(value, WithSchemaId) else value
    return inner


def key_decoder(spec: KeySpec, schemas: Schemas | None = None) -> Callable[[bytes | None], DecodedKey]:
    """schemas: for avro keys (around which the window and session layouts sit)."""
    buffer, _, fmt = spec.key_format.rpartition(":")
    if buffer in BUFFER_KEYS:
        return _buffer_key_decoder(buffer, fmt, _inner_decoder(fmt, schemas, "key"))
    if buffer == fk_subscription.FORMAT_PREFIX:
        return _subscription_key_decoder(fmt, schemas)
    inner = _inner_decoder(spec.key_format, schemas, "key")

    def decode(data: bytes | None) -> DecodedKey:
        if data is None:
            return DecodedKey(None)
        if spec.layout == "key-value":
            value = inner(data)
            return DecodedKey(value, ok=not _is_fallback(value, spec.key_format))
        bounds = windowed_key_bounds(spec.layout, data)
        if bounds is None:  # another layout's key: its bytes would give garbage times
            return DecodedKey(raw(data), ok=False)
        key, start, end, seqnum = bounds
        return _checked(inner(key), spec.key_format, start=start, end=end, seqnum=seqnum)
    return decode


def _subscription_key_decoder(fmt: str, schemas: Schemas | None) -> Callable[[bytes | None], DecodedKey]:
    combined = fk_subscription.key_decoder(_inner_decoder(fmt, schemas, "key"), lambda part: _is_fallback(part, fmt))

    def decode(data: bytes | None) -> DecodedKey:
        key, ok = combined(data)
        return DecodedKey(key, ok=ok)
    return decode


def _buffer_key_decoder(buffer: str, fmt: str, inner: Callable[[bytes | None], Any]) -> Callable[[bytes | None], DecodedKey]:
    head = _TIME.size + (1 if buffer == "join-side" else 0)

    def decode(data: bytes | None) -> DecodedKey:
        if data is None or len(data) < head + _SEQNUM.size:
            return DecodedKey(None if data is None else raw(data), ok=data is None)
        parts: dict[str, Any] = {"time": _TIME.unpack_from(data)[0]}
        if buffer == "join-side":
            parts["side"] = "left" if data[_TIME.size] else "right"
        key = inner(data[head:-_SEQNUM.size])
        parts.update(key=key, seqnum=_SEQNUM.unpack_from(data, len(data) - _SEQNUM.size)[0])
        return DecodedKey(parts, ok=not _is_fallback(key, fmt))
    return decode


def _checked(key: Any, fmt: str, start: int, end: int | None = None, seqnum: int | None = None) -> DecodedKey:
    failed = _is_fallback(key, fmt) if fmt in SCHEMA_FORMATS else isinstance(key, dict) and "base64" in key
    return DecodedKey(key, start, end, seqnum, ok=not failed)


def _is_fallback(value: Any, fmt: str) -> bool:
    """A value the format could not decode: {"base64"} from a plain format, {"error", "hex"}
    from a schema."""
    if fmt in SCHEMA_FORMATS:
        return isinstance(value, dict) and set(value) == {"error", "hex"}
    return fmt != "bytes" and isinstance(value, dict) and set(value) == {"base64"}


def value_decoder(fmt: str, schemas: Schemas | None = None) -> Callable[[bytes | None], tuple[Any, bool]]:
    buffered, _, within = fmt.partition(":")
    if buffered == BUFFERED_VALUE and within:
        return _buffered_value_decoder(value_decoder(within, schemas))
    if buffered == suppress_buffer.FORMAT_PREFIX and within:
        return suppress_buffer.value_decoder(value_decoder(within, schemas))
    if buffered == fk_subscription.FORMAT_PREFIX and within:
        return fk_subscription.value_decoder(value_decoder(within, schemas))
    inner = _inner_decoder(fmt, schemas, "value")

    def decode(data: bytes | None):
        value = inner(data)
        return value, not _is_fallback(value, fmt)
    return decode


def _buffered_value_decoder(inner: Callable[[bytes | None], tuple[Any, bool]]):
    def decode(data: bytes | None) -> tuple[Any, bool]:
        if data is None or len(data) < _TIME.size + 1:
            return (None, True) if data is None else (raw(data), False)
        value, ok = inner(data[_TIME.size + 1:]) if data[_TIME.size] else (None, True)
        return {"buffered_at": _TIME.unpack_from(data)[0], "value": value}, ok
    return decode


def _plausible(ts: int) -> bool:
    return _PLAUSIBLE[0] <= ts <= _PLAUSIBLE[1]


def detect_layout(keys: list[bytes | None]) -> tuple[str, str]:
    """Guess the layout from the keys' bytes; returns (layout, evidence)."""
    present = [k for k in keys if k is not None]
    if not present:
        return "key-value", "no keys to inspect"
    windowed = [k for k in present if len(k) >= WINDOW_STORE.suffix and _plausible(WINDOW_STORE.start(k))
                and 0 <= WINDOW_STORE.seqnum(k) < 1_000_000]
    session = [k for k in present if len(k) >= SESSION_STORE.suffix
               and _plausible((bounds := SESSION_STORE.split(k))[1]) and _plausible(bounds[2])
               and bounds[2] >= bounds[1]]
    if len(session) == len(present):
        return "session", (f"all {len(present)} keys end in two plausible timestamps, the first "
                           "(session end) not before the second (session start)")
    if len(windowed) == len(present):
        seqs = sorted({WINDOW_STORE.seqnum(k) for k in present})
        return "window", (f"all {len(present)} keys end in a plausible 8-byte window start and a "
                          f"4-byte sequence number (values seen: {seqs[:5]})")
    starts = [k for k in present if len(k) >= TIME_WINDOWED_SUFFIX
              and _plausible(time_windowed_start(k))]
    if len(starts) == len(present):
        return "time-windowed", (f"all {len(present)} keys end in a plausible 8-byte window start (an "
                                 "aggregate's output keys)")
    return "key-value", (f"{len(present) - max(len(windowed), len(session), len(starts))} of {len(present)} "
                         "keys do not end in window or session timestamps")


def detect_value_format(values: list[bytes | None]) -> str:
    """A guess from the bytes: fixed 8 or 4 bytes are Kafka's Long/Integer, UTF-8 JSON
    documents are json, other UTF-8 is string, anything else hex."""
    present = [v for v in values if v is not None]
    if not present:
        return "string"
    if all(len(v) == 8 for v in present):
        return "long"
    if all(len(v) == 4 for v in present):
        return "int"
    try:
        text = [v.decode("utf-8") for v in present]
    except UnicodeDecodeError:
        return "hex"
    return "json" if all(_is_json_document(t) for t in text) else "string"


def _is_json_document(text: str) -> bool:
    if text.strip()[:1] not in ("{", "["):
        return False
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def detect_key_format(keys: list[bytes | None], layout: str) -> str:
    trim = {"window": WINDOW_STORE.suffix, "session": SESSION_STORE.suffix, "time-windowed": TIME_WINDOWED_SUFFIX}.get(layout, 0)
    bare: list[bytes | None] = [k[:-trim] if trim else k for k in keys if k is not None]
    return detect_value_format(bare) if bare else "string"
