"""Times and durations as users type them.

Times: ISO-8601 (no zone = UTC, like Kafka's tools), epoch milliseconds (`1714560000000` or
`@1714560000000`), or a duration ago (`-1h`, `PT1H`, `P1DT2H`, `now`); always between
1970-01-01 and 9999-12-31, as record timestamps are. Durations: `500ms`, `10s`, `5m`, `1h`, `2d`, combinations
like `1h30m`, and ISO-8601 (`PT5M`, `P1DT2H`).
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone, tzinfo
from typing import cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kstool.base.errors import UsageError

_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_SIMPLE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_ISO_DURATION = re.compile(
    r"P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<s>\d+(?:\.\d+)?)S)?)?$", re.I)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def now_ms() -> int:
    return int(time.time() * 1000)


def parse_duration(text: str) -> int:
    """Milliseconds in a duration; raises UsageError for anything else."""
    raw = text.strip()
    if not raw:
        raise UsageError("empty duration")
    if raw[0] in "pP":
        match = _ISO_DURATION.match(raw)
        if not match or raw.upper() in ("P", "PT") or raw.upper().endswith("T"):
            raise UsageError(f"invalid ISO-8601 duration {text!r} (e.g. PT5M, P1DT2H)")
        parts = {k: float(v) for k, v in match.groupdict().items() if v}
        return round(parts.get("d", 0) * 86_400_000 + parts.get("h", 0) * 3_600_000
                     + parts.get("m", 0) * 60_000 + parts.get("s", 0) * 1_000)
    pos, total = 0, 0.0
    for match in _SIMPLE.finditer(raw.lower()):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_MS[match.group(2)]
        pos = match.end()
    if pos != len(raw) or pos == 0:
        raise UsageError(f"invalid duration {text!r} (e.g. 500ms, 10s, 5m, 1h, 2d, PT5M)")
    return round(total)


MAX_TIME_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def parse_time(text: str, now: int | None = None) -> int:
    """Epoch milliseconds for an absolute or relative time."""
    raw = text.strip()
    current = now_ms() if now is None else now
    if not raw:
        raise UsageError("empty time: use ISO-8601, epoch milliseconds, or a duration ago (-1h)")
    if raw.lower() == "now":
        ms = current
    elif re.fullmatch(r"@?\d+", raw):
        ms = int(raw.lstrip("@"))
    elif raw[0] == "-" or raw[0] in "pP":
        ms = current - parse_duration(raw.lstrip("-"))
    else:
        ms = _parse_iso(raw, text)
    if not 0 <= ms <= MAX_TIME_MS:
        raise UsageError(f"time {text!r} is outside 1970-01-01 .. 9999-12-31")
    return ms


def check_time_range(from_ms: int | None, to_ms: int | None) -> None:
    if from_ms is not None and to_ms is not None and from_ms > to_ms:
        raise UsageError(f"the time range is empty: from {format_time(from_ms)} is after "
                         f"to {format_time(to_ms)}")


def _parse_iso(raw: str, original: str) -> int:
    candidate = raw.replace(" ", "T", 1) if re.match(r"\d{4}-\d\d-\d\d \d", raw) else raw
    if candidate.endswith(("Z", "z")):
        candidate = candidate[:-1] + "+00:00"
    # Kafka's tools write zones as +0100; Python wants +01:00
    candidate = re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", candidate)
    try:
        parsed = datetime.fromisoformat(candidate)
    except ValueError:
        raise UsageError(
            f"invalid time {original!r}: use ISO-8601 (2024-05-01T12:00:00, UTC unless a zone is "
            "given), epoch milliseconds, or a duration ago (-1h, PT30M)") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return (parsed - _EPOCH) // timedelta(milliseconds=1)  # exact: no float rounding


def format_time(ms: int | None, zone: tzinfo = timezone.utc) -> str | None:
    """ISO-8601 with milliseconds: ...Z in UTC, else with the zone's offset."""
    if ms is None or ms < 0:
        return None
    try:
        shown = datetime.fromtimestamp(ms / 1000, tz=zone).isoformat(timespec="milliseconds")
    except (OverflowError, ValueError, OSError):
        return None
    return shown.replace("+00:00", "Z") if zone is timezone.utc else shown


def time_zone(name: str) -> tzinfo:
    """--tz: an IANA zone name (Europe/Paris), UTC, or `local` (this machine's)."""
    if name.lower() == "local":
        return cast(tzinfo, datetime.now().astimezone().tzinfo)
    if name.upper() in ("UTC", "Z"):
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"unknown time zone {name!r}: use an IANA name (Europe/Paris), UTC or local") from None


def format_duration(ms: int | None) -> str | None:
    """A duration for people: 850ms, 4.2s, 3m07s, 2h05m."""
    if ms is None:
        return None
    if ms < 1_000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    minutes, seconds = divmod(ms // 1000, 60)
    return f"{minutes}m{seconds:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"
