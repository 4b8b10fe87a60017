"""Where a record's new key comes from, for the options that re-key (`--group-by`, `--foreign-key`,
`--global-key`): the record's key, its value, a JSON field of its value (`field:PATH`, a dot
path), or a delimited field of a text value (`split:SEP:N`: the value split at SEP, field N
counted from 0), as Kafka's own tests map keys: `value.split(",")[1]` is `split:,:1`.

A mapper that finds nothing (no such field, fewer fields than N, no value) gives no key, and
the record then counts as one without a key (Kafka Streams skips those). Split works on the
value's bytes: for UTF-8 text that is Java's String#split at a plain separator, except that
empty trailing fields are kept (`a,b,` has the field 2: empty), where Java drops them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kstool.base.errors import UsageError
from kstool.streams.fields import field_text

# each form, as the help and the errors name it
FORMS = {"key": "key", "value": "value", "field": "field:PATH", "split": "split:SEP:N"}


@dataclass(frozen=True)
class KeyMapper:
    spec: str  # as given: key | value | field:PATH | split:SEP:N
    kind: str  # key | value | field | split
    path: str = ""  # field
    separator: bytes = b""  # split
    index: int = 0  # split

    def __call__(self, key: bytes | None, value: bytes | None) -> bytes | None:
        if self.kind == "key":
            return key
        if value is None:
            return None
        if self.kind == "value":
            return value
        if self.kind == "field":
            return field_text(value, self.path)
        fields = value.split(self.separator)
        return fields[self.index] if self.index < len(fields) else None


def key_mapper(spec: str, flag: str, kinds: tuple[str, ...]) -> KeyMapper:
    """`spec` read as one of `kinds`; else one line saying what `flag` takes."""
    kind, _, rest = spec.partition(":")
    if kind in kinds and kind in ("key", "value") and spec == kind:
        return KeyMapper(spec, kind)
    if kind in kinds and kind == "field" and rest:
        return KeyMapper(spec, kind, path=rest)
    if kind in kinds and kind == "split":
        separator, _, index = rest.rpartition(":")  # the separator may itself hold ':'
        if separator and index.isdigit():
            return KeyMapper(spec, kind, separator=separator.encode(), index=int(index))
    forms = ", ".join(FORMS[k] for k in kinds)
    raise UsageError(f"{flag} is one of {forms} (field: a JSON field of the value; split: field N, from 0, "
                     f"of a text value split at SEP, e.g. split:,:1); got {spec!r}")
