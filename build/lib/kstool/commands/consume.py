"""kstool consume TOPIC: read records as jsonl envelopes, a table, CSV, or a format string."""

from __future__ import annotations

import sys

import click

from kstool.kafka.consume import ConsumeOptions, StartSpec, consume as consume_records
from kstool.kafka.records import to_envelope
from kstool.output import Column, Listing, compile_record_format, dumps, emit, info, stderr_is_tty
from kstool.serdes import FORMATS, decoder
from kstool.timeutil import parse_time

from kstool.commands.completion import complete_topics
from kstool.commands.context import Globals, pass_globals

RECORD_COLUMNS = [Column("partition", justify="right"), Column("offset", justify="right"),
                  Column("timestamp", justify="right"), Column("key"), Column("value"),
                  Column("headers")]


@click.command()
@click.argument("topic", shell_complete=complete_topics)
@click.option("--from", "start", default="beginning", show_default=True, metavar="SPEC",
              help="beginning | end | stored (needs --group) | OFFSET | -N (the last N per partition).")
@click.option("--from-time", metavar="TIME", help="Start at the first record with timestamp >= TIME.")
@click.option("--to-time", metavar="TIME", help="Stop after the last record with timestamp <= TIME.")
@click.option("--partition", "-p", "partitions", type=click.IntRange(min=0), multiple=True,
              help="Only these partitions (repeatable).")
@click.option("-e", "--exit", "exit_at_end", is_flag=True, help="Stop at the end offsets as of start.")
@click.option("-n", "--max-messages", type=click.IntRange(min=1), help="Stop after N records.")
@click.option("--group", "-g", help="Commit progress as this consumer group (default: read-only).")
@click.option("--key-format", type=click.Choice(FORMATS), default="string", show_default=True)
@click.option("--value-format", type=click.Choice(FORMATS), default="string", show_default=True)
@click.option("-o", "--output", type=click.Choice(["jsonl", "json", "csv", "table"]),
              help="Record format; default: the value of each record, one per line.")
@click.option("-f", "--format", "fmt", metavar="FMT",
              help="kcat-style format: %k key, %s value, %t topic, %p partition, %o offset, "
                   "%T timestamp, %h headers, \\n newline.")
@pass_globals
def consume(g: Globals, topic, start, from_time, to_time, partitions, exit_at_end, max_messages,
            group, key_format, value_format, output, fmt):
    """Read records from TOPIC (follows new records until Ctrl-C unless -e, -n or --to-time)."""
    if output and fmt:
        raise click.UsageError("use either -o or -f, not both")
    options = ConsumeOptions(
        topic=topic, start=StartSpec.parse(start),
        from_time=parse_time(from_time) if from_time else None,
        to_time=parse_time(to_time) if to_time else None,
        partitions=list(partitions) or None, exit_at_end=exit_at_end,
        max_messages=max_messages, group=group)
    decode_key, decode_value = decoder(key_format), decoder(value_format)
    envelopes = (to_envelope(r, decode_key, decode_value)
                 for r in consume_records(g.clients(), options))
    count = 0
    try:
        if output in ("json", "csv", "table"):
            rows = list(envelopes)
            count = len(rows)
            emit(Listing(rows, RECORD_COLUMNS), output)
        else:
            render = _line_renderer(output, fmt)
            out = sys.stdout
            live = _follows(options)  # a follow prints each record as it comes
            for env in envelopes:
                out.write(render(env))
                count += 1
                if live:
                    out.flush()
    except KeyboardInterrupt:
        pass  # Ctrl-C ends a follow cleanly; the consumer closes in the generator
    finally:
        envelopes.close()
        sys.stdout.flush()
    if stderr_is_tty():
        info(f"consumed {count} record(s)")


def _follows(options: ConsumeOptions) -> bool:
    return not options.exit_at_end and options.to_time is None and options.max_messages is None


def _line_renderer(output: str | None, fmt: str | None):
    if output == "jsonl":
        return lambda env: dumps(env) + "\n"
    return compile_record_format(fmt if fmt is not None else "%s\\n")
