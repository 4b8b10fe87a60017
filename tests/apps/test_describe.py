"""`topology describe --app-id`: an app's topology as its manifest gives it, with the sinks of
the records its runs set aside."""

from __future__ import annotations

import json

from kstool.application.model import AppPaths, Manifest, default_state_dir, save_manifest
from kstool.topologies import REGISTRY
from tests.conftest import cli


def test_an_apps_topology_shows_its_late_record_and_dead_letter_sinks(fresh_home):
    topology = REGISTRY["aggregate"].for_describe("clicks", "counts", {"window": "tumbling:1m"})
    app = "late-app"
    save_manifest(AppPaths(default_state_dir(), app), Manifest(
        app, topology.name, topology.parameters(), topology.input_topics(), topology.output_topics(),
        topology.stores(app), run_settings={"late_topic": "clicks-late", "on_error": "dlq:clicks-dead"}))
    described = cli("topology", "describe", "--app-id", app, "-o", "json")
    assert described.exit_code == 0, described.stderr
    nodes = {n["name"]: n for sub in json.loads(described.stdout)["sub_topologies"] for n in sub["nodes"]}
    assert (nodes["LATE-RECORDS-SINK"]["topic"], nodes["DEAD-LETTER-SINK"]["topic"]) == ("clicks-late", "clicks-dead")
    assert [n for n, node in nodes.items() if "LATE-RECORDS-SINK" in node.get("successors", [])] == [
        n for n, node in nodes.items() if node.get("stores")]
    assert [n for n, node in nodes.items() if "DEAD-LETTER-SINK" in node.get("successors", [])] == [
        n for n, node in nodes.items() if node["type"] == "source"]
    plain = json.loads(cli("topology", "describe", "aggregate", "--window", "tumbling:1m", "--input", "clicks",
                           "--output", "counts", "-o", "json").stdout)
    assert not {n["name"] for sub in plain["sub_topologies"] for n in sub["nodes"]} & {
        "LATE-RECORDS-SINK", "DEAD-LETTER-SINK"}
