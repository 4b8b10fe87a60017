"""`topology describe -o dot|mermaid|svg|png`: kstool's topologies and Kafka Streams apps (from
the text of their Topology#describe()) drawn with every node, edge and store."""

from __future__ import annotations

import html
import json
import re

import pytest

from kstool.descriptions import diagram
from kstool.topologies import REGISTRY
from tests.conftest import cli

# Kafka's TopologyTest.tableNamedMaterializedCountShouldPreserveTopologyStructure (lines
# 1939-1959 at apache/kafka 1eb7644349c): a table re-grouped through a repartition topic.
REPARTITIONED = (
    "Topologies:\n"
    "   Sub-topology: 0\n"
    "    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic])\n"
    "      --> KTABLE-SOURCE-0000000002\n"
    "    Processor: KTABLE-SOURCE-0000000002 (stores: [input-topic-STATE-STORE-0000000000])\n"
    "      --> KTABLE-SELECT-0000000003\n"
    "      <-- KSTREAM-SOURCE-0000000001\n"
    "    Processor: KTABLE-SELECT-0000000003 (stores: [])\n"
    "      --> KSTREAM-SINK-0000000004\n"
    "      <-- KTABLE-SOURCE-0000000002\n"
    "    Sink: KSTREAM-SINK-0000000004 (topic: count-store-repartition)\n"
    "      <-- KTABLE-SELECT-0000000003\n"
    "\n"
    "  Sub-topology: 1\n"
    "    Source: KSTREAM-SOURCE-0000000005 (topics: [count-store-repartition])\n"
    "      --> KTABLE-AGGREGATE-0000000006\n"
    "    Processor: KTABLE-AGGREGATE-0000000006 (stores: [count-store])\n"
    "      --> none\n"
    "      <-- KSTREAM-SOURCE-0000000005\n"
    "\n")
# Kafka's TopologyTest.timeWindowedCogroupedZeroArgCountWithTopologyConfigShouldPreserveTopologyStructure
# (lines 1568-1577 at 1eb7644349c, a named topology), followed by a global store as
# InternalTopologyBuilder.GlobalStore#toString prints one (line 1683), and the "-=>" of older Kafka.
NAMED_WITH_GLOBAL = (
    "Topology: my-topology:\n"
    "   Sub-topology: 0\n"
    "    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-0000000002\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-0000000002 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000001])\n"
    "      --> COGROUPKSTREAM-MERGE-0000000003\n"
    "      <-- KSTREAM-SOURCE-0000000000\n"
    "    Processor: COGROUPKSTREAM-MERGE-0000000003 (stores: [])\n"
    "      --> none\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-0000000002\n\n"
    "   Sub-topology: 1 for global store (will not generate tasks)\n"
    "    Source: KSTREAM-SOURCE-0000000004 (topics: [games])\n"
    "      -=> KTABLE-SOURCE-0000000005\n"
    "    Processor: KTABLE-SOURCE-0000000005 (stores: [games-store])\n"
    "      -=> none\n"
    "      <-- KSTREAM-SOURCE-0000000004\n")


def _dot_edges(text: str) -> set[tuple[str, str]]:
    return set(re.findall(r'^\s*"([^"]+)" -> "([^"]+)"', text, re.MULTILINE))


def _dot_clusters(text: str) -> list[str]:
    return re.findall(r'label="(Sub-topology: [^"]+)"; style=rounded', text)


def _mermaid_edges(text: str) -> set[tuple[str, str]]:
    """Edges by the names of their ends (a node's label names it; topics and stores by theirs)."""
    labels = {}
    for ident, label in re.findall(r'^\s*(n\d+)[\[(/]+"([^"]+)"', text, re.MULTILINE):
        name = label.split("<br/>")[0]
        labels[ident] = name.split(": ", 1)[1] if re.match(r"(Source|Processor|Sink): ", name) else name
    return {(labels[a], labels[b]) for a, b in re.findall(r"^\s*(n\d+) (?:-->|-\.-) (n\d+)$", text, re.MULTILINE)}


def _expected_by_name(edges: set[tuple[str, str]]) -> set[tuple[str, str]]:
    return {(a.split(":", 1)[1] if a.startswith(("topic:", "store:")) else a,
             b.split(":", 1)[1] if b.startswith(("topic:", "store:")) else b) for a, b in edges}


def test_wordcount_is_drawn_node_by_node_with_its_store_and_changelog():
    dot = cli("topology", "describe", "wordcount", "--input", "lines", "--output", "counts", "--app-id", "diagram-test-wc",
              "-o", "dot")
    assert dot.exit_code == 0, dot.stderr
    chain = ["topic:lines", "KSTREAM-SOURCE-0000000000", "KSTREAM-FLATMAPVALUES-0000000001",
             "KSTREAM-AGGREGATE-0000000002", "KTABLE-TOSTREAM-0000000003", "KSTREAM-SINK-0000000004",
             "topic:counts"]
    expected = set(zip(chain, chain[1:])) | {("KSTREAM-AGGREGATE-0000000002", "store:counts")}
    assert _dot_edges(dot.stdout) == expected
    assert _dot_clusters(dot.stdout) == ["Sub-topology: 0"]
    assert 'label="counts\\nchangelog: diagram-test-wc-counts-changelog"' in dot.stdout
    mermaid = cli("topology", "describe", "wordcount", "--input", "lines", "--output", "counts", "-o", "mermaid")
    assert mermaid.stdout.startswith("flowchart TB\n")
    assert _mermaid_edges(mermaid.stdout) == _expected_by_name(expected)


@pytest.mark.parametrize("args", [(t.name, *shape) for t in REGISTRY.values() for shape in t.shapes], ids=" ".join)
def test_every_topology_draws_each_successor_topic_and_store_of_its_description(args):
    base = ["topology", "describe", *args, "--input", "in", "--output", "out"]
    doc = json.loads(cli(*base, "-o", "json").stdout)
    expected = set()
    for sub in doc["sub_topologies"]:
        for node in sub["nodes"]:
            expected |= {(node["name"], s) for s in node.get("successors", [])}
            expected |= {(node["name"], "store:" + s) for s in node.get("stores", [])}
            expected |= {("topic:" + t, node["name"]) for t in node.get("topics", [])}
            if node["type"] == "sink":
                expected.add((node["name"], "topic:" + node["topic"]))
    dot = cli(*base, "-o", "dot").stdout
    assert _dot_edges(dot) == expected and ("topic:in", doc["sub_topologies"][0]["nodes"][0]["name"]) in expected
    assert _dot_clusters(dot) == [f"Sub-topology: {sub['id']}" for sub in doc["sub_topologies"]]
    assert _mermaid_edges(cli(*base, "-o", "mermaid").stdout) == _expected_by_name(expected)


def test_a_kafka_streams_repartition_joins_its_two_sub_topologies(tmp_path):
    path = tmp_path / "describe.txt"
    path.write_text(REPARTITIONED)
    dot = cli("topology", "describe", "--from-file", str(path), "--app-id", "counter", "-o", "dot")
    assert dot.exit_code == 0, dot.stderr
    chain = ["topic:input-topic", "KSTREAM-SOURCE-0000000001", "KTABLE-SOURCE-0000000002", "KTABLE-SELECT-0000000003",
             "KSTREAM-SINK-0000000004", "topic:count-store-repartition", "KSTREAM-SOURCE-0000000005",
             "KTABLE-AGGREGATE-0000000006"]
    expected = set(zip(chain, chain[1:])) | {
        ("KTABLE-SOURCE-0000000002", "store:input-topic-STATE-STORE-0000000000"),
        ("KTABLE-AGGREGATE-0000000006", "store:count-store")}
    assert _dot_edges(dot.stdout) == expected
    assert _dot_clusters(dot.stdout) == ["Sub-topology: 0", "Sub-topology: 1"]
    assert '"topic:count-store-repartition" [shape=cds, label="count-store-repartition", style=dashed]' in dot.stdout
    assert '"topic:input-topic" [shape=cds, label="input-topic"];' in dot.stdout  # dashed: internal topics only
    assert 'changelog: counter-count-store-changelog' in dot.stdout
    text = cli("topology", "describe", "--from-file", str(path)).stdout  # Kafka's text again, line for line
    assert [line.strip() for line in text.splitlines()] == [line.strip() for line in REPARTITIONED.splitlines()]
    mermaid = cli("topology", "describe", "--from-file", "-", "-o", "mermaid", input=REPARTITIONED)
    assert _mermaid_edges(mermaid.stdout) == _expected_by_name(expected)
    assert mermaid.stdout.count("subgraph ") == 2


def test_a_named_topology_with_a_global_store_from_stdin():
    doc = cli("topology", "describe", "--from-file", "-", "--app-id", "app", "-o", "json", input=NAMED_WITH_GLOBAL)
    assert doc.exit_code == 0, doc.stderr
    parsed = json.loads(doc.stdout)
    assert parsed["topology"] == "my-topology"
    assert [(s["id"], s["global"], len(s["nodes"])) for s in parsed["sub_topologies"]] == [(0, False, 3), (1, True, 2)]
    assert {s["name"]: s["changelog_topic"] for s in parsed["stores"]} == {
        "COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000001": "app-COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog",
        "games-store": None}  # a global store is restored from its topic
    dot = cli("topology", "describe", "--from-file", "-", "-o", "dot", input=NAMED_WITH_GLOBAL).stdout
    assert _dot_clusters(dot) == ["Sub-topology: 0", "Sub-topology: 1 (global store)"]
    assert ("KSTREAM-SOURCE-0000000004", "KTABLE-SOURCE-0000000005") in _dot_edges(dot)
    text = cli("topology", "describe", "--from-file", "-", input=NAMED_WITH_GLOBAL)
    assert "    Processor: KTABLE-SOURCE-0000000005 (stores: [games-store])" in text.stdout.splitlines()


def test_text_that_is_not_a_topology_description_is_refused_in_one_line():
    bad = cli("topology", "describe", "--from-file", "-", "-o", "dot",
              input="Topologies:\n   Sub-topology: 0\n    Source: S (topics: [a])\n    Oops: x\n")
    assert bad.exit_code == 2 and bad.stdout == ""
    assert bad.stderr == "kstool: error: stdin, line 4: not a line of Topology#describe(): 'Oops: x'\n"
    neither = cli("topology", "describe", "-o", "dot")
    assert neither.exit_code == 2 and "give a topology NAME, --app-id of an existing app, --from-file or --group" in neither.stderr


@pytest.mark.skipif(diagram.renderer() is None, reason="no Graphviz: neither dot nor graphviz-pure")
def test_svg_and_png_are_rendered_by_graphviz_and_say_by_which():
    svg = cli("topology", "describe", "wordcount", "--input", "lines", "--output", "counts", "-o", "svg")
    assert svg.exit_code == 0, svg.stderr
    assert svg.stdout.lstrip().startswith("<?xml") and "</svg>" in svg.stdout
    drawn = html.unescape(svg.stdout)
    assert "<title>KSTREAM-AGGREGATE-0000000002</title>" in drawn and "<title>topic:lines</title>" in drawn
    assert svg.stderr.startswith("kstool: rendered by ")
    png = cli("topology", "describe", "--from-file", "-", "-o", "png", input=REPARTITIONED)
    assert png.exit_code == 0 and png.stdout_bytes.startswith(b"\x89PNG\r\n\x1a\n")


def test_without_graphviz_svg_fails_clearly(monkeypatch):
    monkeypatch.setattr(diagram, "renderer", lambda: None)
    result = cli("topology", "describe", "wordcount", "-o", "svg")
    assert result.exit_code == 2 and result.stdout == ""
    assert "needs Graphviz" in result.stderr and "pip install 'kstool[diagrams]'" in result.stderr
