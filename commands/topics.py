"""kstool topics list|describe|create|delete."""

from __future__ import annotations

import click

from kstool.commands.completion import complete_topics
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import confirm_or_refuse, named_argument, output_option, yes_option
from kstool.config import parse_key_values
from kstool.kafka import topics as ops
from kstool.output import Column, Listing, emit, info, plural


@click.group()
def topics() -> None:
    """List, describe, create and delete topics."""


@topics.command("list")
@click.option("--internal", is_flag=True, help="Include internal topics (__consumer_offsets...).")
@output_option()
@pass_globals
def list_(g: Globals, internal: bool, output: str) -> None:
    """List topics with partition counts."""
    rows = ops.list_topics(g.clients(), include_internal=internal)
    emit(Listing(rows, [Column("topic"), Column("partitions", justify="right"),
                        Column("replication_factor", "RF", justify="right")]), output)


@topics.command()
@named_argument("topic", "The same as TOPIC (kafka-topics.sh's spelling).", shell_complete=complete_topics)
@output_option()
@pass_globals
def describe(g: Globals, topic: str, output: str) -> None:
    """Partitions, leaders, watermarks, record counts and configs of TOPIC."""
    doc = ops.describe_topic(g.clients(), topic)
    configs = [{"name": k, "value": v} for k, v in doc["configs"].items()]
    emit(Listing(
        rows=doc["partitions"],
        columns=[Column("partition", justify="right"), Column("leader", justify="right"),
                 Column("replicas"), Column("isr", "ISR"),
                 Column("low_offset", "LOW", justify="right"),
                 Column("high_offset", "HIGH", justify="right"),
                 Column("records", justify="right")],
        document=doc,
        title=f"{topic}: {len(doc['partitions'])} partitions, {doc['total_records']} records",
        extra_tables=[Listing(configs, [Column("name", "CONFIG"), Column("value")])] if configs else [],
    ), output)


@topics.command()
@click.argument("topic")
@click.option("-p", "--partitions", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("-r", "--replication-factor", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config (repeatable).")
@pass_globals
def create(g: Globals, topic: str, partitions: int, replication_factor: int, configs: tuple[str, ...]) -> None:
    """Create TOPIC."""
    opts = ops.CreateTopicOptions(topic, partitions, replication_factor,
                                  parse_key_values(configs, "--config"))
    ops.create_topic(g.clients(), opts)
    info(f"created topic {topic} ({plural(partitions, 'partition')})")


@topics.command()
@click.argument("names", metavar="TOPIC...", nargs=-1, required=True, shell_complete=complete_topics)
@yes_option("deleting")
@click.option("--dry-run", is_flag=True, help="Show what would be deleted.")
@pass_globals
def delete(g: Globals, names: tuple[str, ...], yes: bool, dry_run: bool) -> None:
    """Delete topics (all records in them are lost)."""
    clients = g.clients()
    clients.require_topics(list(names))
    if dry_run:
        info("would delete: " + ", ".join(names))
        return
    confirm_or_refuse(f"Delete {len(names)} topic(s): {', '.join(names)}?", yes)
    for name in ops.delete_topics(clients, list(names)):
        info(f"deleted topic {name}")
