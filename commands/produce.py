"""kstool produce TOPIC: records from stdin or a file."""

from __future__ import annotations

import sys
from typing import IO, Any

import click

from kstool.commands.completion import complete_topics
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import TIME, SchemaFlags, record_format_option, schema_options
from kstool.config import parse_key_values
from kstool.kafka.produce import INPUT_FORMATS, ON_ERROR, FieldEncoders, ProduceOptions, produce_lines
from kstool.output import info, plural, stderr_is_tty
from kstool.schemas.formats import record_encoder, schemas_for


@click.command()
@click.argument("topic", shell_complete=complete_topics)
@click.option("--file", "file_", type=click.File("rb"), help="Read from FILE instead of stdin.")
@click.option("--format", "input_format", type=click.Choice(INPUT_FORMATS), default="text",
              show_default=True, help="text: a record per line; jsonl: `consume -o jsonl` envelopes.")
@click.option("-K", "--key-delimiter", metavar="DELIM", help="Split each text line into key DELIM value.")
@click.option("--key", help="Key for every record.")
@click.option("--partition", "-p", type=click.IntRange(min=0), help="Write to this partition.")
@click.option("--header", "-H", "headers", multiple=True, metavar="KEY=VALUE", help="Header (repeatable).")
@click.option("--timestamp", type=TIME, metavar="TIME", help="Record timestamp: ISO-8601, epoch ms, or -1h.")
@record_format_option("key", "How text becomes key bytes; string and raw send the bytes as they are; "
                            "avro, protobuf, jsonschema: JSON encoded with its schema; windowed:FMT, "
                            "session:FMT: {\"key\", \"start\"[, \"end\"]} as Kafka Streams' windowed keys.")
@record_format_option("value", "As --key-format (long, int, double: Kafka's serializers; json: validated).")
@schema_options(writes=True)
@click.option("--on-error", type=click.Choice(ON_ERROR), default="fail", show_default=True,
              help="A bad line: stop there (fail) or report and go on (skip).")
@click.option("--create", is_flag=True, help="Create TOPIC first if it does not exist.")
@click.option("--partitions", type=click.IntRange(min=1), help="With --create: the new topic's partitions [default: 1].")
@pass_globals
def produce(g: Globals, topic: str, file_: IO[Any] | None, input_format: str, key_delimiter: str | None,
            key: str | None, partition: int | None, headers: tuple[str, ...], timestamp: int | None, key_format: str,
            value_format: str, schema_flags: SchemaFlags, on_error: str, create: bool, partitions: int | None) -> None:
    """Write records to TOPIC from stdin (or --file), one per line."""
    if partitions is not None and not create:
        raise click.UsageError("--partitions is for a topic --create makes")
    options = ProduceOptions(
        topic=topic, input_format=input_format, key_delimiter=key_delimiter, key=key,
        partition=partition, headers=list(parse_key_values(headers, "--header").items()),
        timestamp=timestamp,
        key_format=key_format, value_format=value_format, on_error=on_error,
        create_partitions=(partitions or 1) if create else None)
    schemas = schemas_for({"key": key_format, "value": value_format},
                          schema_flags.options(g.client_config().schema_registry))
    encoders = FieldEncoders(record_encoder(key_format, schemas, "key", topic),
                             record_encoder(value_format, schemas, "value", topic))
    stream = file_ if file_ is not None else sys.stdin.buffer
    result = produce_lines(g.clients(), options, stream, encoders)
    if result.created_partitions is not None:
        info(f"created topic {topic} ({plural(result.created_partitions, 'partition')})")
    for skipped in result.skipped:
        info(f"kstool: skipped line {skipped['line']}: {skipped['error']}")
    info(f"wrote {result.written} record(s) to {topic}"
         + (f", skipped {len(result.skipped)} line(s)" if result.skipped else ""))
    if stderr_is_tty() and result.per_partition:
        info("  " + ", ".join(f"p{p}: {n}" for p, n in sorted(result.per_partition.items())))
