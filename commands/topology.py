"""kstool topology describe: a topology as Kafka Streams' Topology#describe() prints it."""

from __future__ import annotations

import click

from kstool import apps as ops
from kstool.application.model import AppPaths, default_state_dir, load_manifest
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import output_option, setting_option
from kstool.output import Column, Listing, emit, render_topology
from kstool.topologies import NAMES, REGISTRY, from_manifest
from kstool.topologies.spec import Setting


@click.group()
def topology():
    """Describe topologies (sub-topologies, nodes, stores, Spark plan)."""


def _describe_options(func):
    """--input, --output, and each topology's settings that shape what describe shows."""
    offered: dict[str, Setting] = {}
    for kind in REGISTRY.values():
        for setting in kind.settings:
            if setting.describe_help is not None:
                offered.setdefault(setting.flag, setting)
    for setting in reversed(list(offered.values())):
        func = setting_option(setting, for_describe=True)(func)
    func = click.option("--output", "output_topic", default="<output>", show_default=True, metavar="TOPIC")(func)
    return click.option("--input", "input_topic", default="<input>", show_default=True, metavar="TOPIC")(func)


@topology.command()
@click.argument("name", type=click.Choice(NAMES))
@click.option("--app-id", help="Describe this app's topology (topics and settings from its manifest).")
@_describe_options
@click.option("--spark-plan", is_flag=True, help="Add Spark's physical plan (starts Spark).")
@output_option(default="text", extra=("text",), long="--output-format", dest="fmt",
               help_text="text: as Kafka Streams' Topology#describe(); json: the document; "
                         "table, jsonl, csv: one row per node.")
@pass_globals
def describe(g: Globals, name, app_id, input_topic, output_topic, spark_plan, fmt, **settings):
    """Print NAME's topology: sub-topologies with source, processor and sink nodes, and stores
    (join: --input is the left topic and the right one is <right>)."""
    manifest = load_manifest(AppPaths(default_state_dir(), app_id)) if app_id else None
    topo = (from_manifest(manifest) if manifest is not None
            else REGISTRY[name].for_describe(input_topic, output_topic, settings))
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
