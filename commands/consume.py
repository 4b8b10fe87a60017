"""kstool consume TOPIC: read records as jsonl envelopes, a table, CSV, or a format string."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Mapping
from types import FrameType
from typing import Any, BinaryIO, Callable

import click

from kstool.base.documents import RecordEnvelope
from kstool.base.errors import Interrupted
from kstool.commands.completion import complete_topics
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import TIME, SchemaFlags, output_option, record_format_option, schema_options
from kstool.kafka.consume import ConsumeOptions, StartSpec
from kstool.kafka.consume import consume as consume_records
from kstool.kafka.dead_letters import PREFIX, DeadLetter
from kstool.kafka.records import to_envelope
from kstool.output import (
    Column,
    Listing,
    compile_record_format,
    dumps,
    emit,
    info,
    stderr_is_tty,
    stdout_is_tty,
    warn,
)
from kstool.schemas.formats import record_decoder, schemas_for

RECORD_COLUMNS = [Column("partition", justify="right"), Column("offset", justify="right"),
                  Column("timestamp", kind="time"), Column("key"), Column("value"),
                  Column("headers")]
# records rendered before each write to stdout (a follow writes each as it comes)
WRITE_EVERY = 1000


@click.command()
@click.argument("topic", shell_complete=complete_topics)
@click.option("--from", "start", metavar="SPEC",
              help="beginning | end | stored (needs --group) | OFFSET | -N (the last N per partition). "
                   "[default: beginning]")
@click.option("--from-time", type=TIME, metavar="TIME", help="Start at the first record with timestamp >= TIME.")
@click.option("--to-time", type=TIME, metavar="TIME", help="Stop after the last record with timestamp <= TIME.")
@click.option("--partition", "-p", "partitions", type=click.IntRange(min=0), multiple=True,
              help="Only these partitions (repeatable).")
@click.option("-e", "--exit", "exit_at_end", is_flag=True, help="Stop at the end offsets as of start.")
@click.option("-n", "--max-messages", type=click.IntRange(min=1), help="Stop after N records.")
@click.option("--group", "-g", help="Commit progress as this consumer group (default: read-only).")
@record_format_option("key", "raw: the bytes as they are (kcat's default); string: UTF-8, else base64 JSON; "
                            "avro, protobuf, jsonschema: decoded with its schema; windowed:FMT, session:FMT: "
                            "Kafka Streams' windowed keys (an aggregate's output) as {\"key\", \"start\"[, \"end\"]}.")
@record_format_option("value", "As --key-format.")
@schema_options()
@output_option(default=None, help_text="Record format; default: the value of each record, one per line.")
@click.option("-f", "--format", "fmt", metavar="FMT",
              help="kcat-style format: %k key, %s value, %t topic, %p partition, %o offset, "
                   "%T timestamp, %h headers, \\n newline.")
@pass_globals
def consume(g: Globals, topic: str, start: str | None, from_time: int | None, to_time: int | None,
            partitions: tuple[int, ...], exit_at_end: bool, max_messages: int | None, group: str | None,
            key_format: str, value_format: str, schema_flags: SchemaFlags, output: str | None, fmt: str | None) -> None:
    """Read records from TOPIC (follows new records until Ctrl-C unless -e, -n or --to-time)."""
    if output and fmt:
        raise click.UsageError("use either -o or -f, not both")
    if start is not None and from_time is not None:
        raise click.UsageError("use either --from or --from-time, not both")
    options = ConsumeOptions(
        topic=topic, start=StartSpec.parse(start or "beginning"),
        from_time=from_time, to_time=to_time,
        partitions=list(partitions) or None, exit_at_end=exit_at_end,
        max_messages=max_messages, group=group)
    structured = output is not None  # raw bytes appear there as {"base64": ...}
    schemas = schemas_for({"key": key_format, "value": value_format},
                          schema_flags.options(g.client_config().schema_registry))
    decode_key = record_decoder("bytes" if structured and key_format == "raw" else key_format, schemas, "key")
    decode_value = record_decoder("bytes" if structured and value_format == "raw" else value_format, schemas,
                                  "value")
    envelopes = (to_envelope(r, decode_key, decode_value)
                 for r in consume_records(g.clients(), options))
    count = 0
    whole = _WholeRecords()
    try:
        if output in ("json", "csv", "table"):
            rows = []
            for env in envelopes:
                rows.append(env)
                count += 1
            emit(_record_listing(rows, output), output)
        else:
            render = _line_renderer(output, fmt, escape=stdout_is_tty())
            out = sys.stdout.buffer
            live = _follows(options)  # a follow prints each record as it comes
            if live and stderr_is_tty():
                info("following new records (-e stops at the end; Ctrl-C quits)")
            lines: list[bytes] = []  # written together: a write per record cost a system call each
            with whole:
                try:
                    for env in envelopes:
                        with whole.record():
                            lines.append(render(env))
                            count += 1
                        if live or len(lines) >= WRITE_EVERY:
                            whole.write(out, lines)
                finally:  # every record counted is on stdout, also when cut short
                    whole.write(out, lines)
    except KeyboardInterrupt:
        if not _follows(options):  # a cut dump must not look complete
            printed = "" if output not in ("json", "csv", "table") else ", none printed"
            raise Interrupted(f"interrupted after {count} record(s){printed}") from None
        # Ctrl-C is how a follow ends: not an error
    finally:
        envelopes.close()
        sys.stdout.flush()
        sys.stdout.buffer.flush()
    failures = sum(getattr(d, "failures", 0) for d in (decode_key, decode_value))
    if failures:
        warn(f"{failures} key(s)/value(s) did not decode: shown as {{\"error\", \"hex\"}}")
    if stderr_is_tty():
        info(f"consumed {count} record(s)")


def _record_listing(rows: list[RecordEnvelope], output: str) -> Listing:
    """Dead letters get a column of their own; a table shows each error in one line, not its stack
    trace among the headers."""
    if not any("dead_letter" in row for row in rows):
        return Listing(rows, RECORD_COLUMNS)
    if output != "table":
        return Listing(rows, [*RECORD_COLUMNS, Column("dead_letter")])
    shown = [{**row, "error": DeadLetter(**row["dead_letter"]).summary(),
              "headers": [h for h in row["headers"] if not h[0].startswith(PREFIX)]} if "dead_letter" in row else row
             for row in rows]
    return Listing(shown, [*RECORD_COLUMNS[:-1], Column("error"), RECORD_COLUMNS[-1]], document=rows)


class _WholeRecords:
    """Ctrl-C while a record is being written takes effect after it, so "interrupted after N
    records" counts exactly the records on stdout, none of them cut."""

    def __init__(self) -> None:
        self.writing = self.pending = False
        self.previous: Callable[[int, FrameType | None], Any] | int | None = None
        self._one = _OneRecord(self)

    def __enter__(self) -> _WholeRecords:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._on_interrupt)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)

    def _on_interrupt(self, signum: int, frame: FrameType | None) -> None:
        if not self.writing:
            raise KeyboardInterrupt
        self.pending = True

    def record(self) -> "_OneRecord":
        return self._one

    def write(self, out: BinaryIO, lines: list[bytes]) -> None:
        """Rendered records, taken from `lines` and written whole: Ctrl-C waits for the write,
        which a signal may cut short (an unbuffered stdout writes what it can: the rest follows)."""
        with self._one:
            data = memoryview(b"".join(lines))
            lines.clear()
            while data:
                data = data[out.write(data):]
            out.flush()


class _OneRecord:
    """The scope of writing one record (a class: a generator-made context costs ~1 µs a record)."""

    def __init__(self, whole: _WholeRecords) -> None:
        self.whole = whole

    def __enter__(self) -> None:
        self.whole.writing = True

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.whole.writing = False
        if self.whole.pending and kind is None:
            raise KeyboardInterrupt


def _follows(options: ConsumeOptions) -> bool:
    return not options.exit_at_end and options.to_time is None and options.max_messages is None


def _line_renderer(output: str | None, fmt: str | None, escape: bool) -> Callable[[Mapping[str, Any]], bytes]:
    """escape: a terminal gets keys and values with their control bytes escaped (a pipe gets the
    bytes as they are)."""
    if output == "jsonl":
        return lambda env: (dumps(env) + "\n").encode("utf-8")
    return compile_record_format(fmt if fmt is not None else "%s\\n", escape)
