"""Where to reset input offsets to: exactly one of Kafka's reset specs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kstool.base.timeutil import now_ms, parse_duration, parse_time
from kstool.reset.exceptions import ResetPlanError

KINDS = ("to-earliest", "to-latest", "to-offset", "to-datetime", "by-duration", "shift-by", "from-file")


@dataclass(frozen=True)
class ResetSpec:
    kind: str = "to-earliest"
    offset: int | None = None  # to-offset, shift-by
    timestamp: int | None = None  # to-datetime, by-duration (resolved to a time)
    file_offsets: dict[tuple[str, int], int] | None = None  # from-file

    def describe(self) -> str:
        if self.kind in ("to-offset", "shift-by"):
            return f"{self.kind} {self.offset}"
        if self.kind in ("to-datetime", "by-duration"):
            return f"{self.kind} (timestamp {self.timestamp})"
        return self.kind


def build_spec(to_earliest: bool = False, to_latest: bool = False, to_offset: int | None = None,
               to_datetime: str | None = None, by_duration: str | None = None,
               shift_by: int | None = None, from_file: str | None = None,
               now: int | None = None) -> ResetSpec:
    given = [name for name, value in (("--to-earliest", to_earliest), ("--to-latest", to_latest),
                                      ("--to-offset", to_offset is not None),
                                      ("--to-datetime", to_datetime is not None),
                                      ("--by-duration", by_duration is not None),
                                      ("--shift-by", shift_by is not None),
                                      ("--from-file", from_file is not None)) if value]
    if len(given) > 1:
        raise ResetPlanError(f"give only one reset target, not {' and '.join(given)}")
    if to_latest:
        return ResetSpec("to-latest")
    if to_offset is not None:
        return ResetSpec("to-offset", offset=to_offset)
    if to_datetime is not None:
        return ResetSpec("to-datetime", timestamp=parse_time(to_datetime, now))
    if by_duration is not None:
        return ResetSpec("by-duration", timestamp=(now_ms() if now is None else now) - parse_duration(by_duration))
    if shift_by is not None:
        return ResetSpec("shift-by", offset=shift_by)
    if from_file is not None:
        try:
            text = Path(from_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ResetPlanError(f"cannot read --from-file {from_file}: {exc.strerror}") from None
        return ResetSpec("from-file", file_offsets=parse_offsets_csv(text, from_file))
    return ResetSpec("to-earliest")


def parse_offsets_csv(text: str, origin: str = "--from-file") -> dict[tuple[str, int], int]:
    """Kafka's reset CSV: topic,partition,offset per line, no header."""
    offsets: dict[tuple[str, int], int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        row = line.split(",")
        if len(row) != 3:
            raise ResetPlanError(f"{origin}:{lineno}: expected topic,partition,offset")
        topic, partition, offset = (cell.strip() for cell in row)
        # isdecimal, not isdigit: '²' is a digit that int() refuses
        if not topic or not partition.isdecimal() or not offset.isdecimal():
            raise ResetPlanError(f"{origin}:{lineno}: expected topic,partition,offset with "
                                 f"non-negative integers, got {','.join(row)!r}")
        offsets[(topic, int(partition))] = int(offset)
    if not offsets:
        raise ResetPlanError(f"{origin}: no offsets in the file")
    return offsets


def format_offsets_csv(offsets: dict[tuple[str, int], int]) -> str:
    return "".join(f"{t},{p},{o}\n" for (t, p), o in sorted(offsets.items()))
