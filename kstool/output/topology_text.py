"""A topology description (kstool.descriptions) as Kafka Streams' Topology#describe() text."""

from __future__ import annotations


def render_topology(doc: dict) -> str:
    """Text in the shape of Kafka Streams' Topology#describe()."""
    lines = ["Topologies:"]
    for sub in doc["sub_topologies"]:
        lines.append(f"   Sub-topology: {sub['id']}" + (" for global store (will not generate tasks)"
                                                       if sub.get("global") else ""))
        predecessors: dict[str, list[str]] = {}
        for node in sub["nodes"]:
            for succ in node.get("successors", []):
                predecessors.setdefault(succ, []).append(node["name"])
        for node in sub["nodes"]:
            kind = node["type"]
            if kind == "source":
                topics = node.get("topic_pattern") or f"[{', '.join(node['topics'])}]"
                lines.append(f"    Source: {node['name']} (topics: {topics})")
            elif kind == "sink":
                target = f"topic: {node['topic']}" if node.get("topic") else f"extractor class: {node.get('topic_extractor')}"
                lines.append(f"    Sink: {node['name']} ({target})")
            else:
                lines.append(f"    Processor: {node['name']} (stores: [{', '.join(node['stores'])}])")
            if kind != "sink":
                lines.append(f"      --> {', '.join(node.get('successors') or ['none'])}")
            if predecessors.get(node["name"]):
                lines.append(f"      <-- {', '.join(predecessors[node['name']])}")
        lines.append("")
    for store in doc.get("stores", []):
        if "kind" in store:  # kstool's own; a Kafka Streams app's text says no more than its name
            lines.append(f"Store: {store['name']} ({store['kind']}, key {store['key_format']}, "
                         f"value {store['value_format']}) changelog: {store['changelog_topic']}")
    if doc.get("spark_plan"):
        lines += ["", "Spark plan:", doc["spark_plan"]]
    return "\n".join(lines)
