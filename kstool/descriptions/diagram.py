"""A topology document (kstool's, or one read from Kafka Streams' describe text) as a diagram:
Graphviz dot, Mermaid, and SVG/PNG rendered by Graphviz.

Drawn as Kafka Streams names things: each sub-topology a box ("Sub-topology: N"), its source,
processor and sink nodes by name; topics outside the boxes, so a topic one sub-topology writes
and another reads (a repartition topic) joins them; stores as cylinders beside the processors
that use them, labelled with their changelog topic.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from kstool.base.errors import UsageError

RENDERED = ("svg", "png")


def _sub_label(sub: dict) -> str:
    return f"Sub-topology: {sub['id']}" + (" (global store)" if sub.get("global") else "")


def _store_label(doc: dict, name: str) -> str:
    changelog = next((s.get("changelog_topic") for s in doc.get("stores", []) if s["name"] == name), None)
    return f"{name}\\nchangelog: {changelog}" if changelog else name


def _topics(node: dict) -> list[str]:
    if node["type"] == "source":
        return node.get("topics") or ([f"/{node['topic_pattern']}/"] if node.get("topic_pattern") else [])
    if node["type"] == "sink" and node.get("topic"):
        return [node["topic"]]
    return []


def _internal_topics(doc: dict) -> set[str]:
    """Topics the topology both writes and reads: its repartition (and foreign-key join) topics."""
    nodes = [node for sub in doc["sub_topologies"] for node in sub["nodes"]]
    written = {t for node in nodes if node["type"] == "sink" for t in _topics(node)}
    return written & {t for node in nodes if node["type"] == "source" for t in _topics(node)}


def edges(doc: dict) -> list[tuple[str, str, str]]:
    """(from, to, kind) with kind "flow" (topic -> source, node -> successor, sink -> topic) or
    "store" (processor - store). Topics and stores are named "topic:NAME" and "store:NAME"."""
    out = []
    for sub in doc["sub_topologies"]:
        for node in sub["nodes"]:
            name = node["name"]
            if node["type"] == "source":
                out += [(f"topic:{t}", name, "flow") for t in _topics(node)]
            out += [(name, succ, "flow") for succ in node.get("successors", [])]
            if node["type"] == "sink":
                out += [(name, f"topic:{t}", "flow") for t in _topics(node)]
            out += [(name, f"store:{s}", "store") for s in node.get("stores", [])]
    return out


def _beside(doc: dict) -> tuple[list[str], list[str]]:
    """The topics and the stores drawn outside the sub-topologies' boxes."""
    ends = {end for source, target, _ in edges(doc) for end in (source, target)}
    return (sorted(e.removeprefix("topic:") for e in ends if e.startswith("topic:")),
            sorted(e.removeprefix("store:") for e in ends if e.startswith("store:")))


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\\\\n", "\\n") + '"'


def to_dot(doc: dict) -> str:
    lines = [f"digraph {_quote(doc.get('topology', 'topology'))} {{", "  rankdir=TB; fontname=\"Helvetica\";",
             '  node [fontname="Helvetica", fontsize=10];', '  edge [fontname="Helvetica", fontsize=9];']
    for sub in doc["sub_topologies"]:
        lines.append(f"  subgraph {_quote('cluster_' + str(sub['id']) + ('_global' if sub.get('global') else ''))} {{")
        lines.append(f"    label={_quote(_sub_label(sub))}; style=rounded;")
        for node in sub["nodes"]:
            style = "rounded,filled" if node["type"] == "processor" else "filled"
            fill = {"source": "#dbeafe", "sink": "#dcfce7", "processor": "#f3f4f6"}[node["type"]]
            lines.append(f"    {_quote(node['name'])} [shape=box, style={_quote(style)}, "
                         f"fillcolor={_quote(fill)}, label={_quote(node['type'].capitalize() + ': ' + node['name'])}];")
        lines.append("  }")
    topics, stores = _beside(doc)
    internal = _internal_topics(doc)
    for topic in topics:
        lines.append(f"  {_quote('topic:' + topic)} [shape=cds, label={_quote(topic)}"
                     + (", style=dashed" if topic in internal else "") + "];")
    for store in stores:
        lines.append(f"  {_quote('store:' + store)} [shape=cylinder, label={_quote(_store_label(doc, store))}];")
    for source, target, kind in edges(doc):
        attrs = " [style=dashed, arrowhead=none]" if kind == "store" else ""
        lines.append(f"  {_quote(source)} -> {_quote(target)}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(doc: dict) -> str:
    ids: dict[str, str] = {}

    def ident(name: str) -> str:
        return ids.setdefault(name, f"n{len(ids)}")

    def text(label: str) -> str:
        return '"' + label.replace('"', "#quot;").replace("\\n", "<br/>") + '"'

    lines = ["flowchart TB"]
    for sub in doc["sub_topologies"]:
        lines.append(f"  subgraph sub{sub['id']}{'g' if sub.get('global') else ''}[{text(_sub_label(sub))}]")
        for node in sub["nodes"]:
            lines.append(f"    {ident(node['name'])}[{text(node['type'].capitalize() + ': ' + node['name'])}]")
        lines.append("  end")
    topics, stores = _beside(doc)
    for topic in topics:
        lines.append(f"  {ident('topic:' + topic)}[/{text(topic)}/]")
    for store in stores:
        lines.append(f"  {ident('store:' + store)}[({text(_store_label(doc, store))})]")
    for source, target, kind in edges(doc):
        lines.append(f"  {ident(source)} {'-.-' if kind == 'store' else '-->'} {ident(target)}")
    return "\n".join(lines) + "\n"


def renderer() -> tuple[str, str] | None:
    """(command, description) of the Graphviz that renders: the `dot` command when installed,
    else graphviz-pure (`pip install 'kstool[diagrams]'`), found beside this Python too."""
    dot = shutil.which("dot")
    if dot:
        return dot, f"Graphviz dot ({dot})"
    beside = Path(sys.executable).parent / "graphviz-pure"
    pure = shutil.which("graphviz-pure") or (str(beside) if beside.exists() else None)
    if pure:
        return pure, f"graphviz-pure ({pure})"
    return None


def render(dot_text: str, fmt: str) -> tuple[bytes, str]:
    """The diagram as svg or png bytes, and which renderer made it."""
    found = renderer()
    if found is None:
        raise UsageError(f"-o {fmt} needs Graphviz: install the dot command (e.g. apt install graphviz) or "
                         "pip install 'kstool[diagrams]' (graphviz-pure); -o dot prints the source")
    command, description = found
    proc = subprocess.run([command, f"-T{fmt}"], input=dot_text.encode(), capture_output=True, timeout=120)
    if proc.returncode != 0:
        reason = (proc.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        raise UsageError(f"{description} could not render the diagram: {reason}")
    return proc.stdout, description
