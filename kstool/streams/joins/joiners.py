"""What every join kind shares: `--how`, and the joined value (`--joiner`)."""

from __future__ import annotations

import json
import re
from typing import Callable

from kstool.streams.task import LEFT, RIGHT

HOWS = ("inner", "left", "outer")
JOINERS = ("json", "concat")
SIDES = {LEFT: "left", RIGHT: "right"}

Joiner = Callable[[bytes | None, bytes | None], bytes]


# what JSON text can begin with after its whitespace (json.loads also takes NaN and Infinity):
# other text is taken as it is without a failed parse, which costs more than the join itself
_JSON_START = re.compile(r"[ \t\n\r]*[{\[\"\-0-9tfnNI]")
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_QUOTED = json.encoder.encode_basestring  # how _COMPACT writes a str (ensure_ascii=False)


def make_joiner(kind: str, separator: str = ",") -> Joiner:
    """json: {"left": ..., "right": ...}, each side parsed as JSON when it is JSON, else text;
    concat: left + separator + right, a missing side as `null` (as Java's string concat)."""
    if kind == "concat":
        sep = separator.encode()
        return lambda left, right: (b"null" if left is None else left) + sep + (b"null" if right is None else right)

    def as_json(data: bytes | None) -> str:
        """A side's JSON text, as the encoder would write it inside the result: each side on its
        own, so that text (most values) is quoted by the encoder's C function, not the whole
        object encoded."""
        if data is None:
            return "null"
        text = data.decode("utf-8", "replace")
        if _JSON_START.match(text):
            try:
                return _COMPACT.encode(json.loads(text))
            except ValueError:
                pass
        return _QUOTED(text)

    return lambda left, right: f'{{"left":{as_json(left)},"right":{as_json(right)}}}'.encode()


def joined(joiner: Joiner, side: int, this: bytes | None, other: bytes | None) -> bytes:
    return joiner(this, other) if side == LEFT else joiner(other, this)
