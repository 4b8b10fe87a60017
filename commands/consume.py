"""kstool consume TOPIC: read records as jsonl envelopes, a table, CSV, or a format string."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any, BinaryIO, Callable

import click

from kstool.base.documents import RecordEnvelope
from kstool.base.errors import Interrupted
from kstool.commands.completion import complete_topics
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import TIME, SchemaFlags, output_option, record_format_option, schema_options
from kstool.kafka.consume import ConsumeOptions, StartSpec, consume as consume_records, consume_batches
from kstool.kafka.dead_letters import PREFIX, DeadLetter
from kstool.kafka.records import Record, to_envelope
from kstool.output import (
    Column,
    Listing,
    compile_batch_format,
    compile_batch_jsonl,
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
    count = 0
    whole = _WholeRecords()
    try:
        if output in ("json", "csv", "table"):
            rows = []
            for record in consume_records(g.clients(), options):
                rows.append(to_envelope(record, decode_key, decode_value))
                count += 1  # what "interrupted after N record(s)" counts
            emit(_record_listing(rows, output), output)
        else:
            render = _batch_renderer(output, fmt, (key_format, value_format), stdout_is_tty(),
                                     lambda r: to_envelope(r, decode_key, decode_value))
            out = sys.stdout.buffer
            if _follows(options) and stderr_is_tty():
                info("following new records (-e stops at the end; Ctrl-C quits)")
            lines: list[bytes] = []
            batches = consume_batches(g.clients(), options)
            with whole:
                try:
                    for batch in batches:
                        with whole.record():
                            lines.append(render(batch))
                            count += len(batch)
                        whole.write(out, lines)  # a batch at a time: a write per record cost a system call each
                finally:  # every record counted is on stdout, also when cut short
                    whole.write(out, lines)
                    batches.close()
    except KeyboardInterrupt:
        if not _follows(options):  # a cut dump must not look complete
            printed = "" if output not in ("json", "csv", "table") else ", none printed"
            raise Interrupted(f"interrupted after {count} record(s){printed}") from None
        # Ctrl-C is how a follow ends: not an error
    finally:
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


def _batch_renderer(output: str | None, fmt: str | None, formats: tuple[str, str], escape: bool,
                    envelope: Callable[[Record], RecordEnvelope]) -> Callable[[Sequence[Any]], bytes]:
    """A batch of fetched records as lines: jsonl envelopes, or the format (default: each value),
    whole batches at once where keys and values are shown as they are (raw, or string when they
    are UTF-8: compile_batch_format); escape: a terminal gets keys and values with their control
    bytes escaped (a pipe gets the bytes as they are)."""
    if output == "jsonl":
        def envelope_by_envelope(batch: Sequence[Any]) -> bytes:
            return "".join([dumps(envelope(Record.from_message(m))) + "\n" for m in batch]).encode("utf-8")
        lines = compile_batch_jsonl(*formats)
        return envelope_by_envelope if lines is None else lambda batch: lines(batch) or envelope_by_envelope(batch)
    fmt = fmt if fmt is not None else "%s\\n"
    one = compile_record_format(fmt, escape)

    def record_by_record(batch: Sequence[Any]) -> bytes:
        return b"".join([one(envelope(Record.from_message(m))) for m in batch])
    if escape or not set(formats) <= {"raw", "string"}:
        return record_by_record
    whole = compile_batch_format(fmt, text_fields=[part for part, f in zip(("key", "value"), formats) if f == "string"])
    return lambda batch: whole(batch) or record_by_record(batch)
