"""kcat's record format strings (`consume -f`): a record, or a batch of fetched messages, to bytes."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from itertools import chain, repeat
from operator import methodcaller
from typing import Any, Callable, cast

from kstool.base.serdes import decoder
from kstool.output.listings import dumps

_FORMAT_TOKEN = re.compile(r"%[kstpoThKS%]|\\[nt\\]")


def compile_record_format(fmt: str, escape: bool = False) -> Callable[[Mapping[str, Any]], bytes]:
    """kcat-style record format: %k key, %s value, %t topic, %p partition, %o offset,
    %T timestamp (ms), %h headers (k=v,...), %K / %S key / value length, %% a percent sign,
    and the escapes \\n \\t \\\\. Returns a function (envelope) -> bytes: raw keys and
    values are written as they are, as kcat writes them, or with `escape` (for a terminal)
    with control characters and bytes that are not UTF-8 as \\xNN."""
    parts: list = []
    pos = 0
    for match in _FORMAT_TOKEN.finditer(fmt):
        parts.append(fmt[pos:match.start()].encode("utf-8"))
        token = _TOKENS[match.group(0)]
        parts.append(_escaped(token) if escape and match.group(0) in ("%k", "%s", "%h") else token)
        pos = match.end()
    parts.append(fmt[pos:].encode("utf-8"))

    def render(env: Mapping[str, Any]) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(env) for p in parts)
    return render


def compile_batch_format(fmt: str, text_fields: Collection[str]) -> Callable[[Sequence[Any]], bytes | None]:
    """compile_record_format for whole batches of fetched messages (confluent-kafka's), a column
    per token and no envelope per record: what a batch renders to, or None for a batch to render
    record by record. text_fields: "key" and/or "value", shown as text (the `string` format:
    bytes that are not UTF-8 are shown as base64 JSON instead), so a batch renders whole only
    when those the format shows are all UTF-8: checked at once, joined by newlines (a text of its
    own between two of them, so the join is valid exactly when each one is)."""
    pieces: list[bytes | str] = []  # constant bytes, or a token with a column of its own
    for text, token in zip(_FORMAT_TOKEN.split(fmt), [*_FORMAT_TOKEN.findall(fmt), None]):
        for piece in (text.encode("utf-8"), _CONSTANT_TOKENS.get(token, token) if token else b""):
            if isinstance(piece, bytes) and pieces and isinstance(pieces[-1], bytes):
                pieces[-1] += piece
            elif piece:
                pieces.append(piece)
    checked = [shown for part, shown, length in (("key", "%k", "%K"), ("value", "%s", "%S"))
               if part in text_fields and {shown, length} & set(pieces)]

    def render(messages: Sequence[Any]) -> bytes | None:
        columns = {token: _MESSAGE_COLUMNS[token](messages) for token in {*checked, *pieces} if isinstance(token, str)}
        for shown in checked:
            try:
                b"\n".join(columns[shown]).decode("utf-8")
            except UnicodeDecodeError:
                return None
        if not any(isinstance(piece, str) for piece in pieces):
            return b"".join(cast(list[bytes], pieces)) * len(messages)
        rows = zip(*[repeat(piece) if isinstance(piece, bytes) else columns[piece] for piece in pieces])
        return b"".join(chain.from_iterable(rows))
    return render


_decode_header = decoder("string")


def _header_text(headers: list[tuple[str, bytes | None]] | None) -> bytes:
    return b",".join(as_bytes(name) + b"=" + _header_value(_decode_header(data)) for name, data in headers or ())


def _header_value(value: Any) -> bytes:
    """A header's value in %h: a null one as kcat shows it."""
    return b"NULL" if value is None else as_bytes(value)


# C0 controls but tab, DEL and C1 controls: what a terminal would act on instead of showing
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def escape_controls(data: bytes) -> bytes:
    text = data.decode("utf-8", "backslashreplace")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text).encode("utf-8")


def _escaped(token: Callable[[dict], bytes]) -> Callable[[dict], bytes]:
    return lambda env: escape_controls(token(env))


def as_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return dumps(value).encode("utf-8")


def _length(value: Any) -> bytes:
    return b"-1" if value is None else str(len(as_bytes(value))).encode()


_TOKENS = {
    "%k": lambda e: as_bytes(e["key"]),
    "%s": lambda e: as_bytes(e["value"]),
    "%t": lambda e: as_bytes(e["topic"]),
    "%p": lambda e: as_bytes(str(e["partition"])),
    "%o": lambda e: as_bytes(str(e["offset"])),
    "%T": lambda e: b"" if e["timestamp"] is None else as_bytes(str(e["timestamp"])),
    "%h": lambda e: b",".join(as_bytes(k) + b"=" + _header_value(v) for k, v in e["headers"]),
    "%K": lambda e: _length(e["key"]),
    "%S": lambda e: _length(e["value"]),
    "%%": lambda e: b"%",
    "\\n": lambda e: b"\n",
    "\\t": lambda e: b"\t",
    "\\\\": lambda e: b"\\",
}

# the same tokens as columns of a batch of fetched messages (a timestamp of type 0 is none;
# headers as text), each made with no Python call per message but the message's own
_KEY, _VALUE, _PARTITION, _OFFSET = (methodcaller(name) for name in ("key", "value", "partition", "offset"))
_MESSAGE_COLUMNS: dict[str, Callable[[Sequence[Any]], list[bytes]]] = {
    "%k": lambda ms: [key or b"" for key in map(_KEY, ms)],
    "%s": lambda ms: [value or b"" for value in map(_VALUE, ms)],
    "%t": lambda ms: [topic.encode("utf-8") for topic in map(methodcaller("topic"), ms)],
    "%p": lambda ms: [b"%d" % partition for partition in map(_PARTITION, ms)],
    "%o": lambda ms: [b"%d" % offset for offset in map(_OFFSET, ms)],
    "%T": lambda ms: [b"%d" % ts if kind else b"" for kind, ts in map(methodcaller("timestamp"), ms)],
    "%h": lambda ms: [_header_text(headers) for headers in map(methodcaller("headers"), ms)],
    "%K": lambda ms: [b"-1" if key is None else b"%d" % len(key) for key in map(_KEY, ms)],
    "%S": lambda ms: [b"-1" if value is None else b"%d" % len(value) for value in map(_VALUE, ms)],
}
_CONSTANT_TOKENS = {"%%": b"%", "\\n": b"\n", "\\t": b"\t", "\\\\": b"\\"}
