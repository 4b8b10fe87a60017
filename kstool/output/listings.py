"""Listings: rows and columns, and the formats a command shows them in (`-o`): `table` (rich
on a TTY, plain tabulate when piped), `json` (one stable document), `jsonl` (one object per
row), `csv` (header + rows). JSON keys are snake_case and stable. Tables are for people: a
column of times shows ISO-8601 (in --tz's zone), of sizes or durations readable units (its
`kind`); json, jsonl and csv keep the numbers (epoch ms, bytes, seconds)."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timezone, tzinfo
from typing import TYPE_CHECKING, Any, cast

from kstool.base.timeutil import format_duration, format_time

if TYPE_CHECKING:
    from rich.console import JustifyMethod


FORMATS = ("table", "json", "jsonl", "csv")


@dataclass
class Column:
    key: str
    header: str | None = None
    justify: str = "left"
    # how a table shows the numbers: "time" (epoch ms), "bytes", "seconds", "ms" (durations)
    kind: str | None = None

    @property
    def title(self) -> str:
        return self.header or self.key.upper().replace("_", " ")

    def cell(self, value: Any) -> str:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and self.kind is not None:
            shown = _FOR_PEOPLE[self.kind](value)
            if shown is not None:
                return shown
        return _cell(value)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


_shown_zone: list[tzinfo] = [timezone.utc]  # --tz: the zone tables show times in


def show_times_in(zone: tzinfo) -> None:
    _shown_zone[0] = zone


def shown_time(ms: int | None) -> str | None:
    """A time as tables show it: in --tz's zone."""
    return format_time(ms, _shown_zone[0])


_FOR_PEOPLE = {"time": lambda ms: format_time(int(ms), _shown_zone[0]), "bytes": _size,
               "seconds": lambda s: format_duration(round(s * 1000)), "ms": lambda ms: format_duration(int(ms))}


@dataclass
class Listing:
    """Rows for table/jsonl/csv, and the JSON document (defaults to the rows)."""

    rows: Sequence[Mapping[str, Any]]  # TypedDict rows fit a Mapping, not a dict
    columns: list[Column]
    document: Any = None
    title: str | None = None
    footer: list[str] = field(default_factory=list)
    extra_tables: list["Listing"] = field(default_factory=list)

    def json_document(self) -> Any:
        return self.rows if self.document is None else self.document


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()


# one encoder for every document and line: json.dumps makes a new one per call, which a record
# stream of `consume -o jsonl` paid per record
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(obj: Any) -> str:
    return _COMPACT_JSON.encode(obj)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return dumps(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def emit(listing: Listing, fmt: str = "table", out=None) -> None:
    out = out or sys.stdout
    if fmt == "json":
        out.write(json.dumps(listing.json_document(), indent=2, ensure_ascii=False) + "\n")
    elif fmt == "jsonl":
        for row in listing.rows:
            out.write(dumps(row) + "\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([c.key for c in listing.columns])
        for row in listing.rows:
            writer.writerow([_csv_cell(row.get(c.key)) for c in listing.columns])
    else:
        _emit_table(listing, out)
        for extra in listing.extra_tables:
            out.write("\n")
            _emit_table(extra, out)
        for line in listing.footer:
            out.write(line + "\n")


def _csv_cell(value: Any) -> str:
    """As JSON writes it: true/false, null, nested values as JSON; text and numbers plain."""
    return str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else dumps(value)


def _rich_table(listing: Listing):
    from rich.table import Table

    table = Table(title=listing.title, title_justify="left", box=None, header_style="bold")
    for col in listing.columns:
        table.add_column(col.title, justify=cast("JustifyMethod", col.justify))
    for row in listing.rows:
        table.add_row(*(c.cell(row.get(c.key)) for c in listing.columns))
    return table


def _emit_table(listing: Listing, out) -> None:
    if out is sys.stdout and stdout_is_tty():
        from rich.console import Console

        Console().print(_rich_table(listing))
        return
    from tabulate import tabulate

    if listing.title:
        out.write(listing.title + "\n")
    rows = [[c.cell(row.get(c.key)) for c in listing.columns] for row in listing.rows]
    out.write(tabulate(rows, headers=[c.title for c in listing.columns], tablefmt="plain",
                       disable_numparse=True) + "\n")
