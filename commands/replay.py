"""kstool replay: copy a time or offset range of a topic, or a jsonl dump, into a topic."""

from __future__ import annotations

import re
from pathlib import Path

import click

from kstool.base.errors import UsageError
from kstool.commands.completion import complete_topics
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import TIME, SchemaFlags, output_option, record_format_option, schema_options
from kstool.output import Column, Listing, emit, info, stderr_is_tty
from kstool.replay.copy import ReplayOptions, planned_count, replay as run_replay
from kstool.replay.dead_letters import DeadLetterReplay, DeadLetterSummary, replay_dead_letters


def parse_partition_offsets(values: tuple[str, ...], flag: str) -> dict[int, int]:
    out = {}
    for value in values:
        match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", value)
        if not match:
            raise UsageError(f"{flag} expects PARTITION:OFFSET, got {value!r}")
        out[int(match.group(1))] = int(match.group(2))
    return out


def parse_rate(text: str | None) -> float | None:
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:/s)?\s*", text)
    if not match or float(match.group(1)) <= 0:
        raise UsageError(f"--rate expects records per second, e.g. 500/s, got {text!r}")
    return float(match.group(1))


@click.command()
@click.option("--from-topic", metavar="TOPIC", help="Source topic.", shell_complete=complete_topics)
@click.option("--from-file", type=click.Path(dir_okay=False, path_type=Path), metavar="DUMP",
              help="Source: a `kstool consume -o jsonl` dump.")
@click.option("--to-topic", metavar="TOPIC", shell_complete=complete_topics,
              help="Target topic [required, except with --dead-letters: each record's source topic].")
@click.option("--dead-letters", is_flag=True,
              help="--from-topic holds dead letters (Kafka Streams' __streams.errors.* headers): send each "
                   "back to the topic and partition it came from, without the error headers; letters sent "
                   "back before are skipped (group kstool-replayed-DLQ remembers them).")
@click.option("--include-replayed", is_flag=True, help="With --dead-letters: send the letters sent before again too.")
@click.option("--from-time", type=TIME, metavar="TIME", help="First record timestamp to copy (inclusive).")
@click.option("--to-time", type=TIME, metavar="TIME", help="Last record timestamp to copy (inclusive).")
@click.option("--from-offset", multiple=True, metavar="P:O", help="Start partition P at offset O.")
@click.option("--to-offset", multiple=True, metavar="P:O", help="Stop partition P after offset O.")
@click.option("--partition", "-p", "partitions", type=click.IntRange(min=0), multiple=True,
              help="Only these source partitions.")
@click.option("--filter-key", metavar="REGEX", help="Only records whose key (as text) matches.")
@record_format_option("key", "How --filter-key reads keys (avro, protobuf, jsonschema: as JSON), "
                            "and a --from-file dump's keys.")
@record_format_option("value", "A --from-file dump's values (as consume -o jsonl wrote them).")
@schema_options(writes=True)
@click.option("--rate", metavar="N/s", help="At most N records per second.")
@click.option("--keep-partitions", "partitioning", flag_value="keep",
              help="Same partition as the source [default when the partition counts match].")
@click.option("--by-key", "partitioning", flag_value="by-key", help="Partition by key (Kafka's partitioner).")
@click.option("--now", is_flag=True, help="Stamp records with the current time instead of keeping theirs.")
@click.option("--no-provenance", is_flag=True, help="Do not add kstool.replay.* headers.")
@click.option("--transactional", is_flag=True,
              help="Commit chunks as Kafka transactions; a rerun with the same arguments resumes (its "
                   "position is kept in the consumer group kstool-replay-...).")
@click.option("--dry-run", is_flag=True, help="Count what would be copied, per partition; write nothing.")
@click.option("--yes", "-y", is_flag=True, help="Allow replaying a topic into itself.")
@output_option()
@pass_globals
def replay(g: Globals, from_topic: str | None, from_file: Path | None, to_topic: str | None, dead_letters: bool,
           from_time: int | None, to_time: int | None, from_offset: tuple[str, ...], to_offset: tuple[str, ...],
           partitions: tuple[int, ...], filter_key: str | None, key_format: str, value_format: str,
           schema_flags: SchemaFlags, rate: str | None, partitioning: str | None, now: bool, no_provenance: bool,
           transactional: bool, include_replayed: bool, dry_run: bool, yes: bool, output: str) -> None:
    """Copy records for reprocessing: keys, values, headers and timestamps kept, plus
    provenance headers (source topic, partition, offset)."""
    if dead_letters:
        given = {"--from-file": from_file, "--from-offset": from_offset, "--to-offset": to_offset,
                 "--filter-key": filter_key, "--rate": rate, "--keep-partitions/--by-key": partitioning,
                 "--now": now, "--transactional": transactional, "--yes": yes}
        refused = [flag for flag, value in given.items() if value]
        if refused:
            raise UsageError(f"--dead-letters does not take {', '.join(refused)}")
        if from_topic is None:
            raise UsageError("--dead-letters needs --from-topic (the dead-letter topic)")
        _replay_dead_letters(g, DeadLetterReplay(
            from_topic, to_topic, from_time, to_time, list(partitions) or None, not no_provenance, dry_run,
            include_replayed), output)
        return
    if include_replayed:
        raise UsageError("--include-replayed goes with --dead-letters")
    if to_topic is None:
        raise UsageError("replay needs --to-topic (or --dead-letters)")
    options = ReplayOptions(
        to_topic=to_topic, from_topic=from_topic, from_file=from_file,
        from_time=from_time, to_time=to_time,
        from_offsets=parse_partition_offsets(from_offset, "--from-offset"),
        to_offsets=parse_partition_offsets(to_offset, "--to-offset"),
        partitions=list(partitions) or None, filter_key=filter_key, rate=parse_rate(rate),
        by_key=None if partitioning is None else partitioning == "by-key", now=now,
        provenance=not no_provenance, transactional=transactional, dry_run=dry_run,
        allow_same_topic=yes, key_format=key_format, value_format=value_format,
        schemas=schema_flags.options(g.client_config().schema_registry))
    clients = g.clients()
    if stderr_is_tty():
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task(f"replay to {to_topic}", total=planned_count(clients, options))
            summary = run_replay(clients, options, lambda n: bar.advance(task, n))
    else:
        summary = run_replay(clients, options)
    doc = summary.to_dict()
    verb = "would copy" if dry_run else "copied"
    emit(Listing(doc["partitions"],
                 [Column("partition", justify="right"), Column("records", justify="right"),
                  Column(f"first_{summary.position}", justify="right"),
                  Column(f"last_{summary.position}", justify="right"),
                  Column("first_time"), Column("last_time")],
                 document=doc, title=f"{verb} {doc['records']} record(s) from {doc['source']} to {to_topic} "
                                     f"({doc['partitioning']}) in {doc['seconds']:.1f}s"), output)
    if summary.skipped_by_filter:
        info(f"{summary.skipped_by_filter} record(s) did not match --filter-key")
    if summary.resume_group and not dry_run:
        info(f"its position is kept in consumer group {summary.resume_group}: the same replay again writes only "
             "what was not copied (nothing, once done); delete that group to copy the slice again")


def _replay_dead_letters(g: Globals, options: DeadLetterReplay, output: str) -> None:
    if stderr_is_tty():
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task(f"dead letters of {options.from_topic}", total=None)
            summary = replay_dead_letters(g.clients(), options, lambda n: bar.advance(task, n))
    else:
        summary = replay_dead_letters(g.clients(), options)
    doc = summary.to_dict()
    verb = "would send" if options.dry_run else "sent"
    emit(Listing(doc["targets"],
                 [Column("topic"), Column("partition", justify="right"), Column("records", justify="right"),
                  Column("first_time"), Column("last_time"), Column("exceptions")],
                 document=doc, title=f"{verb} {doc['records']} dead letter(s) from {doc['source']} back "
                                     f"in {doc['seconds']:.1f}s", footer=_dead_letter_notes(summary)),
         output)


def _dead_letter_notes(summary: DeadLetterSummary) -> list[str]:
    notes = [f"note: {summary.replayed_before} dead letter(s) of the slice were sent back before and are "
             f"skipped (--include-replayed sends them again)"] if summary.replayed_before else []
    notes += [f"note: {topic} is read by {len(groups)} group(s) ({', '.join(groups)}): each gets these records "
              "again, not only the app that failed them" for topic, groups in summary.readers.items() if groups]
    return notes
