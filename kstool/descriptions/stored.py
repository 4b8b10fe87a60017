"""A streams group's topology as the broker keeps it (Kafka 4.4, KIP-1331: each member sends
its Topology#describe() through StreamsGroupTopologyDescriptionUpdate), as the same document
`text.parse_describe` makes of the app's own describe() text.

The broker's form loses three things describe() prints, which this module restores:
- node order: the members send nodes sorted by name (Kafka Streams' TopologyDescriptionConverter);
  describe() sorts by sub-tree size, largest first, then by name
  (InternalTopologyBuilder.NodeComparator; a node's size is 1 plus its successors' sizes);
- global stores' sub-topology numbers: not sent; sub-topologies are numbered 0..N-1 with
  global stores among them, so the missing numbers are theirs, in order (the members send
  global stores sorted by number);
- internal topic names: sent with the application.id prefix (`<app>-X-repartition`), which
  describe() leaves off; the group's own topology (its repartition topics) says which ones.
"""

from __future__ import annotations

import itertools
from functools import cache
from typing import Callable

from kstool.base.documents import StoredTopologyNode, StreamsGroupDescription


def describe_document(description: StreamsGroupDescription) -> dict:
    """The describe() document of a streams group whose stored topology is AVAILABLE."""
    group, stored = description["group"], description.get("stored_topology")
    assert stored is not None, "only an AVAILABLE description has a topology"
    internal = {topic for sub in description["subtopologies"]
                for topic in sub["repartition_source_topics"] + sub["repartition_sink_topics"]}
    changelogs = {topic for sub in description["subtopologies"] for topic in sub["changelog_topics"]}

    def shown(topic: str) -> str:
        return topic.removeprefix(f"{group}-") if topic in internal else topic

    numbered = {int(sub["subtopology"]): (False, _in_describe_order(sub["nodes"], shown))
                for sub in stored["subtopologies"]}
    free = (number for number in itertools.count() if number not in numbered)
    numbered |= {next(free): (True, [_node(store["source"], shown), _node(store["processor"], shown)])
                 for store in stored["global_stores"]}
    subs = [{"id": number, "global": is_global, "nodes": nodes} for number, (is_global, nodes) in sorted(numbered.items())]
    stores = {store: is_global for is_global, nodes in numbered.values() for node in nodes
              for store in node.get("stores", [])}
    return {"topology": "kafka-streams", "sub_topologies": subs,
            "stores": [{"name": store, "global": is_global,
                        "changelog_topic": (f"{group}-{store}-changelog"
                                            if f"{group}-{store}-changelog" in changelogs else None)}
                       for store, is_global in sorted(stores.items())]}


def _in_describe_order(nodes: list[StoredTopologyNode], shown: Callable[[str], str]) -> list[dict]:
    successors = {node["name"]: node["successors"] for node in nodes}

    @cache
    def size(name: str) -> int:
        return 1 + sum(size(successor) for successor in successors.get(name, []))

    return [_node(node, shown) for node in sorted(nodes, key=lambda node: (-size(node["name"]), node["name"]))]


def _node(node: StoredTopologyNode, shown: Callable[[str], str]) -> dict:
    """A node as parse_describe makes it (a pattern source's regex is not sent: no topics)."""
    if node["type"] == "source":
        return {"name": node["name"], "type": "source", "topics": [shown(t) for t in node["source_topics"]],
                "successors": node["successors"]}
    if node["type"] == "sink":  # a TopicNameExtractor's sink sends no topic
        topic = node["sink_topic"]
        return {"name": node["name"], "type": "sink", "topic": shown(topic) if topic is not None else None}
    return {"name": node["name"], "type": "processor", "stores": node["stores"], "successors": node["successors"]}

