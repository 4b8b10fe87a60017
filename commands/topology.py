"""kstool topology describe: a topology as Kafka Streams' Topology#describe() prints it."""

from __future__ import annotations

import sys
from typing import IO, Any

import click

from kstool.application.model import AppPaths, default_state_dir, load_manifest
from kstool.apps import describe as ops
from kstool.apps.kafka_streams import stored_topology
from kstool.commands.completion import complete_groups
from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import F, output_option, setting_option
from kstool.descriptions import diagram
from kstool.descriptions.text import parse_describe
from kstool.output import Column, Listing, emit, info, render_topology, stdout_is_tty
from kstool.topologies import NAMES, REGISTRY, from_manifest
from kstool.topologies.spec import Setting

DIAGRAMS = ("dot", "mermaid", *diagram.RENDERED)


@click.group()
def topology() -> None:
    """Describe topologies (sub-topologies, nodes, stores, Spark plan)."""


def _describe_options(func: F) -> F:
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
@click.argument("name", type=click.Choice(NAMES), required=False)
@click.option("--app-id", help="Describe this app's topology (topics and settings from its manifest); with "
                               "--from-file, the application.id that names its changelog topics.")
@click.option("--from-file", "from_file", type=click.File("r"), metavar="FILE",
              help="A Kafka Streams app's Topology#describe() text ('-' for stdin).")
@click.option("--group", "streams_group", metavar="GROUP", shell_complete=complete_groups,
              help="A streams group's topology, as its broker keeps it (Kafka 4.4+ with a topology "
                   "description plugin: the describe() its members send).")
@_describe_options
@click.option("--spark-plan", is_flag=True, help="Add Spark's physical plan (starts Spark).")
@output_option(default="text", extra=("text", *DIAGRAMS), long="--output-format", dest="fmt",
               help_text="text: as Kafka Streams' Topology#describe(); json: the document; table, jsonl, "
                         "csv: one row per node; dot, mermaid: a diagram's source; svg, png: the diagram "
                         "(Graphviz: dot, or graphviz-pure).")
@pass_globals
def describe(g: Globals, name: str | None, app_id: str | None, from_file: IO[Any] | None,
             streams_group: str | None, input_topic: str, output_topic: str, spark_plan: bool, fmt: str,
             **settings: Any) -> None:
    """Print NAME's topology, an app's (--app-id), or a Kafka Streams app's (--from-file, --group):
    sub-topologies with source, processor and sink nodes, and stores (join: --input is the left
    topic and the right one is <right>)."""
    if from_file is not None and streams_group is not None:
        raise click.UsageError("give --from-file or --group, not both")
    if streams_group is not None:
        doc = stored_topology(g.clients(), streams_group)
    elif from_file is not None:
        origin = "stdin" if from_file.name == "<stdin>" else from_file.name
        doc = parse_describe(from_file.read(), origin, app_id)
    else:
        manifest = load_manifest(AppPaths(default_state_dir(), app_id)) if app_id else None
        run_settings = manifest.run_settings if manifest is not None else None
        if manifest is not None and app_id is not None:
            topo, label = from_manifest(manifest), app_id
        elif name is not None:
            topo, label = REGISTRY[name].for_describe(input_topic, output_topic, settings), app_id or name
        else:
            raise click.UsageError("give a topology NAME, --app-id of an existing app, --from-file or --group")
        doc = ops.describe_topology(topo, label, spark_plan, g.debug, run_settings)
    if fmt in DIAGRAMS:
        _draw(doc, fmt)
    elif fmt == "text":
        click.echo(render_topology(doc))
    else:
        rows = [{"sub_topology": sub["id"], "node": node["name"], "type": node["type"],
                 "topics": node.get("topics") or ([node["topic"]] if node.get("topic") else []),
                 "stores": node.get("stores", []), "successors": node.get("successors", [])}
                for sub in doc["sub_topologies"] for node in sub["nodes"]]
        emit(Listing(rows, [Column("sub_topology", "SUB", justify="right"), Column("node"), Column("type"),
                            Column("topics"), Column("stores"), Column("successors")], document=doc), fmt)


def _draw(doc: dict[str, Any], fmt: str) -> None:
    source = diagram.to_mermaid(doc) if fmt == "mermaid" else diagram.to_dot(doc)
    if fmt not in diagram.RENDERED:
        click.echo(source, nl=False)
        return
    if fmt == "png" and stdout_is_tty():
        raise click.UsageError("-o png writes binary data: redirect it to a file (> topology.png)")
    image, renderer = diagram.render(source, fmt)
    info(f"kstool: rendered by {renderer}")
    sys.stdout.flush()
    sys.stdout.buffer.write(image)
    sys.stdout.buffer.flush()
