"""kstool replay --from-file: partitions checked first, the provenance of each copied record."""

from __future__ import annotations

import json

from tests.conftest import cli
from tests.helpers import T0, create_topic, read_all


def test_file_replay_checks_partitions_first_and_records_its_provenance(kafka, topic_name, tmp_path):
    create_topic(kafka, topic_name, 2)
    dump = tmp_path / "dump.jsonl"
    good = [{"partition": i % 2, "key": f"k{i}", "value": f"v{i}", "timestamp": T0 + i, "headers": []}
            for i in range(3)]
    dump.write_text("".join(json.dumps(e) + "\n" for e in [*good, {**good[0], "partition": 5}]))
    refused = cli("replay", "--from-file", str(dump), "--to-topic", topic_name)
    assert refused.exit_code == 2 and "dump.jsonl:4" in refused.stderr and "nothing was written" in refused.stderr
    assert read_all(kafka, topic_name) == []

    dump.write_text("\n" + "".join(json.dumps(e) + "\n" for e in good))  # records on lines 2..4
    result = cli("replay", "--from-file", str(dump), "--to-topic", topic_name, "-o", "json")
    assert result.exit_code == 0, result.stderr
    rows = {r["partition"]: r for r in json.loads(result.stdout)["partitions"]}
    assert (rows[0]["first_line"], rows[0]["last_line"], rows[1]["first_line"]) == (2, 4, 3)
    for msg in read_all(kafka, topic_name):
        headers = dict(msg.headers())
        assert headers["kstool.replay.file"] == str(dump).encode()
        line = int(headers["kstool.replay.line"])
        assert msg.value() == f"v{line - 2}".encode() and msg.timestamp()[1] == T0 + line - 2
