"""kstool topics list|describe|create|delete."""

from __future__ import annotations

from collections import Counter

import click

from kstool.base.documents import TopicDescription
from kstool.commands.completion import complete_topics
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import confirm_or_refuse, named_argument, output_option, yes_option
from kstool.config import parse_key_values
from kstool.kafka import topics as ops
from kstool.output import Column, Listing, emit, info, plural


@click.group()
def topics() -> None:
    """List, describe, create and delete topics."""


_REPLICAS = [Column("leader", justify="right"), Column("replicas"), Column("isr", "ISR"), Column("health")]


@topics.command("list")
@click.option("--internal", is_flag=True, help="Include internal topics (__consumer_offsets...).")
@click.option("--under-replicated-partitions", "under_replicated", is_flag=True,
              help="Only partitions with fewer in-sync replicas than replicas (as kafka-topics.sh).")
@click.option("--unavailable-partitions", "unavailable", is_flag=True,
              help="Only partitions without a live leader (as kafka-topics.sh).")
@click.option("--under-min-isr-partitions", "under_min_isr", is_flag=True,
              help="Only partitions with fewer in-sync replicas than min.insync.replicas: acks=all writes "
                   "fail there (as kafka-topics.sh).")
@output_option()
@pass_globals
def list_(g: Globals, internal: bool, under_replicated: bool, unavailable: bool, under_min_isr: bool,
          output: str) -> None:
    """List topics with partition counts, or only the partitions that need attention (any of
    the flags given)."""
    if under_replicated or unavailable or under_min_isr:
        unhealthy = ops.unhealthy_partitions(g.clients(), under_replicated, unavailable, under_min_isr,
                                             include_internal=internal)
        emit(Listing(unhealthy, [Column("topic"), Column("partition", justify="right"), *_REPLICAS]), output)
        return
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
        columns=[Column("partition", justify="right"), *_REPLICAS,
                 Column("low_offset", "LOW", justify="right"),
                 Column("high_offset", "HIGH", justify="right"),
                 Column("records", justify="right")],
        document=doc,
        title=f"{topic}: {len(doc['partitions'])} partitions, {doc['total_records']} records{_problems(doc)}",
        extra_tables=[Listing(configs, [Column("name", "CONFIG"), Column("value")])] if configs else [],
    ), output)


def _problems(doc: TopicDescription) -> str:
    """The partitions that need attention, counted by health, for the title."""
    counts = Counter(p["health"] for p in doc["partitions"] if p["health"] != ops.HEALTHY)
    return "".join(f"; {n} {health}" for health, n in sorted(counts.items()))


@topics.command()
@click.argument("topic")
@click.option("-p", "--partitions", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("-r", "--replication-factor", type=click.IntRange(min=1),
              help="Replicas per partition [default: the broker's default.replication.factor].")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config (repeatable).")
@pass_globals
def create(g: Globals, topic: str, partitions: int, replication_factor: int | None,
           configs: tuple[str, ...]) -> None:
    """Create TOPIC."""
    opts = ops.CreateTopicOptions(topic, partitions, replication_factor or ops.BROKER_DEFAULT,
                                  parse_key_values(configs, "--config"))
    created = ops.create_topic(g.clients(), opts)
    info(f"created topic {topic} ({plural(partitions, 'partition')}, "
         f"replication factor {created['replication_factor']})")


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
