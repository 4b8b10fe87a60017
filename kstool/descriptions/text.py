"""A Kafka Streams app's topology from the text its `Topology#describe()` prints, as the same
document kstool's own topologies describe (kstool.contract.Topology.describe), so that one
renderer draws both.

The text's grammar, as Kafka 2.x-4.x print it (TopologyDescription's toString, e.g.
InternalTopologyBuilder.TopologyDescription): a "Topologies:" (or "Topology: NAME:") header;
"Sub-topology: N" blocks, "Sub-topology: N for global store (will not generate tasks)" for
global stores; nodes "Source: NAME (topics: [a, b])" or "(topics: REGEX)" for a pattern,
"Processor: NAME (stores: [s])", "Sink: NAME (topic: t)" or "(extractor class: C)"; then
"--> a, b" (or "--> none"; older versions print "-=>") and "<-- a" lines. Indentation differs
between versions and is ignored.
"""

from __future__ import annotations

import re

from kstool.base.errors import UsageError

_HEADER = re.compile(r"^Topolog(?:ies:|y: (?P<name>.+):)$")
_SUB = re.compile(r"^Sub-topology: (?P<id>\d+)(?P<global> for global store \(will not generate tasks\))?$")
_NODE = re.compile(r"^(?P<kind>Source|Processor|Sink): (?P<name>\S+) \((?P<detail>.*)\)$")
_SUCCESSORS = re.compile(r"^-[-=]> (?P<names>.+)$")  # older Kafka versions print "-=>"
_PREDECESSORS = re.compile(r"^<-- (?P<names>.+)$")


def _split(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def _names(text: str) -> list[str]:
    """A node's successors: names, or "none"."""
    return [] if text.strip() == "none" else _split(text)


def _listed(text: str) -> list[str]:
    """[a, b] as Java prints a collection."""
    return _split(text.strip().removeprefix("[").removesuffix("]"))


def _node(kind: str, name: str, detail: str, where: str) -> dict:
    label, _, value = detail.partition(": ")
    if kind == "Source" and label == "topics" and value.startswith("["):
        return {"name": name, "type": "source", "topics": _listed(value), "successors": []}
    if kind == "Source" and label == "topics":  # a pattern source prints its regex bare
        return {"name": name, "type": "source", "topics": [], "topic_pattern": value, "successors": []}
    if kind == "Processor" and label == "stores":
        return {"name": name, "type": "processor", "stores": _listed(value), "successors": []}
    if kind == "Sink" and label == "topic":
        return {"name": name, "type": "sink", "topic": value}
    if kind == "Sink" and label == "extractor class":
        return {"name": name, "type": "sink", "topic": None, "topic_extractor": value}
    raise UsageError(f"{where}: cannot read {kind.lower()} {name}'s details: ({detail})")


def parse_describe(text: str, origin: str = "the topology text", app_id: str | None = None) -> dict:
    """The document of a Topology#describe() text. With app_id, each store gets the changelog
    topic Kafka Streams gives it (APP-STORE-changelog); without, its changelog is unknown."""
    name = None
    subs: list[dict] = []
    last: dict | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        where = f"{origin}, line {lineno}"
        if not line:
            continue
        if match := _HEADER.match(line):
            name = match["name"]
        elif match := _SUB.match(line):
            subs.append({"id": int(match["id"]), "global": bool(match["global"]), "nodes": []})
            last = None
        elif match := _NODE.match(line):
            if not subs:
                raise UsageError(f"{where}: a node before any 'Sub-topology:' line")
            last = _node(match["kind"], match["name"], match["detail"], where)
            subs[-1]["nodes"].append(last)
        elif match := _SUCCESSORS.match(line):
            if last is None or "successors" not in last:
                raise UsageError(f"{where}: '-->' without a source or processor above it")
            last["successors"] = _names(match["names"])
        elif _PREDECESSORS.match(line):
            continue  # the successors already say it
        else:
            raise UsageError(f"{where}: not a line of Topology#describe(): {line[:80]!r}")
    if not subs:
        raise UsageError(f"{origin}: no 'Sub-topology:' in it; give the text Topology#describe() prints")
    stores = {store: sub["global"] for sub in subs for node in sub["nodes"] for store in node.get("stores", [])}
    # a global store is restored from its source topic: it has no changelog
    return {"topology": name or "kafka-streams", "sub_topologies": subs,
            "stores": [{"name": store, "global": is_global,
                        "changelog_topic": f"{app_id}-{store}-changelog" if app_id and not is_global else None}
                       for store, is_global in sorted(stores.items())]}
