"""All rendering lives here: operations return data, commands hand it to `emit`.

Formats: `table` (rich on a TTY, plain tabulate when piped), `json` (one stable document),
`jsonl` (one object per row), `csv` (header + rows). JSON keys are snake_case and stable.
Tables are for people: a column of times shows ISO-8601 UTC, of sizes or durations readable
units (its `kind`); json, jsonl and csv keep the numbers (epoch ms, bytes, seconds).
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timezone, tzinfo
from itertools import chain, repeat
from operator import methodcaller
from typing import TYPE_CHECKING, Any, Callable, cast

from kstool.base.serdes import decoder
from kstool.base.timeutil import format_duration, format_time

if TYPE_CHECKING:
    from rich.console import JustifyMethod

    from kstool.engine import BatchStatus

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


def format_counts(counts: dict[str, int]) -> str:
    """Records per topic for progress lines: "out: 3, changelog: 3", or "nothing"."""
    return ", ".join(f"{topic}: {n}" for topic, n in counts.items()) or "nothing"


def batch_line(status: BatchStatus) -> str:
    parts = [f"batch {status.batch_id}", f"{status.input_records} records in",
             f"{status.duration_ms / 1000:.1f}s ({status.records_per_second:,.0f}/s)",
             f"out {format_counts(status.written)} ({status.sink_seconds:.1f}s)"]
    if status.lag is not None:
        parts.append(f"lag {status.lag}")
    if status.errors:
        parts.append(f"bad records {status.errors}")
    if status.late:
        parts.append(f"late records {status.late}")
    return " | ".join(parts)


class RunReporter:
    """What a running app tells the operator (a kstool.engine.progress.Progress): a live
    status line on a TTY, one log line per batch when piped. Always on stderr; stdout stays
    free for data."""

    def __init__(self, app_id: str):
        self.app_id = app_id
        self.tty = stderr_is_tty()
        self._live: Any = None

    def message(self, text: str) -> None:
        self._print(f"kstool: {self.app_id}: {text}")

    def batch(self, status: BatchStatus) -> None:
        if self.tty:
            self._live_update(f"{self.app_id}: {batch_line(status)}")
        else:
            self._print(f"kstool: {self.app_id}: {batch_line(status)}")

    def _print(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text)
        else:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def _live_update(self, text: str) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        if self._live is None:
            self._live = Live(Text(text), console=Console(stderr=True), transient=True,
                              refresh_per_second=4)
            self._live.start()
        else:
            self._live.update(Text(text))

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[int | None]) -> str:
    """Values as bars scaled to the largest (unknown ones as spaces)."""
    top = max((v for v in values if v is not None), default=0)
    return "".join(" " if v is None else _BARS[round(v / top * (len(_BARS) - 1)) if top else 0]
                   for v in values)


class Dashboard:
    """A table redrawn in place on the terminal (rich Live); `q` or Ctrl-C quits."""

    def __init__(self) -> None:
        self._live: Any = None
        self._saved_tty: Any = None

    def __enter__(self) -> "Dashboard":
        from rich.live import Live

        if sys.stdin.isatty():  # keys arrive one by one, unechoed
            import termios
            import tty

            self._saved_tty = termios.tcgetattr(sys.stdin)
            tty.setcbreak(sys.stdin)
        self._live = Live(auto_refresh=False, screen=False)
        self._live.start()
        return self

    def show(self, listing: Listing) -> None:
        self._live.update(_rich_table(listing), refresh=True)

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; False when the user asked to quit."""
        import os
        import select
        import time

        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._saved_tty is None:  # no keyboard: only Ctrl-C quits
                time.sleep(left)
                break
            ready, _, _ = select.select([sys.stdin], [], [], left)
            if ready and b"q" in os.read(sys.stdin.fileno(), 64).lower():
                return False
        return True

    def __exit__(self, *exc: Any) -> None:
        self._live.stop()
        if self._saved_tty is not None:
            import termios

            termios.tcsetattr(sys.stdin, termios.TCSADRAIN, self._saved_tty)


def plural(count: int, noun: str) -> str:
    """`1 partition`, `2 partitions`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def info(message: str) -> None:
    """A human note on stderr (never mixed into data on stdout)."""
    sys.stderr.write(message + "\n")


def warn(message: str) -> None:
    sys.stderr.write(f"kstool: warning: {message}\n")


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


def render_topology(doc: dict) -> str:
    """Text in the shape of Kafka Streams' Topology#describe()."""
    lines = ["Topologies:"]
    for sub in doc["sub_topologies"]:
        lines.append(f"   Sub-topology: {sub['id']}" + (" for global store (will not generate tasks)"
                                                       if sub.get("global") else ""))
        predecessors: dict[str, list[str]] = {}
        for node in sub["nodes"]:
            for succ in node.get("successors", []):
                predecessors.setdefault(succ, []).append(node["name"])
        for node in sub["nodes"]:
            kind = node["type"]
            if kind == "source":
                topics = node.get("topic_pattern") or f"[{', '.join(node['topics'])}]"
                lines.append(f"    Source: {node['name']} (topics: {topics})")
            elif kind == "sink":
                target = f"topic: {node['topic']}" if node.get("topic") else f"extractor class: {node.get('topic_extractor')}"
                lines.append(f"    Sink: {node['name']} ({target})")
            else:
                lines.append(f"    Processor: {node['name']} (stores: [{', '.join(node['stores'])}])")
            if kind != "sink":
                lines.append(f"      --> {', '.join(node.get('successors') or ['none'])}")
            if predecessors.get(node["name"]):
                lines.append(f"      <-- {', '.join(predecessors[node['name']])}")
        lines.append("")
    for store in doc.get("stores", []):
        if "kind" in store:  # kstool's own; a Kafka Streams app's text says no more than its name
            lines.append(f"Store: {store['name']} ({store['kind']}, key {store['key_format']}, "
                         f"value {store['value_format']}) changelog: {store['changelog_topic']}")
    if doc.get("spark_plan"):
        lines += ["", "Spark plan:", doc["spark_plan"]]
    return "\n".join(lines)
