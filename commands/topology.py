"""kstool topology describe: a topology as Kafka Streams' Topology#describe() prints it."""

from __future__ import annotations

import click

from kstool import apps as ops
from kstool.engine.app import AppPaths, default_state_dir, load_manifest
from kstool.output import FORMATS, Column, Listing, emit, render_topology
from kstool.topologies import NAMES, from_manifest

from kstool.commands.context import Globals, pass_globals


@click.group()
def topology():
    """Describe topologies (sub-topologies, nodes, stores, Spark plan)."""


@topology.command()
@click.argument("name", type=click.Choice(NAMES))
@click.option("--app-id", help="Describe this app's topology (topics and settings from its manifest).")
@click.option("--input", "input_topic", default="<input>", show_default=True, metavar="TOPIC")
@click.option("--output", "output_topic", default="<output>", show_default=True, metavar="TOPIC")
@click.option("--window", metavar="SPEC", help="aggregate: tumbling:SIZE | hopping:SIZE,ADVANCE | session:GAP.")
@click.option("--emit", "emit_mode", type=click.Choice(["update", "final"]), default="update", show_default=True,
              help="aggregate with --window.")
@click.option("--kind", type=click.Choice(["stream-stream", "stream-table", "table-table"]),
              default="stream-stream", show_default=True, help="join: which sides are tables.")
@click.option("--how", type=click.Choice(["inner", "left", "outer"]), default="inner", show_default=True,
              help="join.")
@click.option("--spark-plan", is_flag=True, help="Add Spark's physical plan (starts Spark).")
@click.option("-o", "--output-format", "fmt", type=click.Choice(["text", *FORMATS]), default="text",
              show_default=True, help="text: as Kafka Streams' Topology#describe(); json: the document; "
                                      "table, jsonl, csv: one row per node.")
@pass_globals
def describe(g: Globals, name, app_id, input_topic, output_topic, window, emit_mode, kind, how, spark_plan, fmt):
    """Print NAME's topology: sub-topologies with source, processor and sink nodes, and stores
    (join: --input is the left topic and the right one is <right>)."""
    manifest = load_manifest(AppPaths(default_state_dir(), app_id)) if app_id else None
    if manifest is not None:
        topo = from_manifest(manifest)
    elif name == "aggregate":
        from kstool.topologies.aggregate import Aggregate

        topo = Aggregate(input_topic, output_topic, window=window, emit=emit_mode)
    elif name == "join":
        from kstool.topologies.join import Join

        within = 0 if kind == "stream-stream" else None  # the windows' size is a run setting
        topo = Join(input_topic, "<right>", output_topic, kind, how, within)
    else:
        from kstool.topologies.wordcount import WordCount

        topo = WordCount(input_topic, output_topic)
    doc = ops.describe_topology(topo, app_id or name, spark_plan, g.debug)
    if fmt == "text":
        click.echo(render_topology(doc))
        return
    rows = [{"sub_topology": sub["id"], "node": node["name"], "type": node["type"],
             "topics": node.get("topics") or ([node["topic"]] if node.get("topic") else []),
             "stores": node.get("stores", []), "successors": node.get("successors", [])}
            for sub in doc["sub_topologies"] for node in sub["nodes"]]
    emit(Listing(rows, [Column("sub_topology", "SUB", justify="right"), Column("node"), Column("type"),
                        Column("topics"), Column("stores"), Column("successors")], document=doc), fmt)
