"""The kstool home and app state are private to their owner (kstool.base.home)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from tests.conftest import cli, cli_subprocess
from tests.helpers import create_topic, produce_values


def test_home_files_are_private(fresh_home):
    result = cli_subprocess("broker", "start", "--port", "0")
    try:
        assert result.exit_code == 0
        broker_dir = fresh_home / "broker"
        assert stat.S_IMODE(os.stat(broker_dir).st_mode) == 0o700
        for name in ("profile.json", "broker.log"):
            assert stat.S_IMODE(os.stat(broker_dir / name).st_mode) == 0o600, name
    finally:
        cli_subprocess("broker", "stop")


def test_app_state_is_private(kafka, spark, topic_name):
    create_topic(kafka, topic_name, 1)
    produce_values(kafka, topic_name, [b"a b"])
    app = topic_name + "-app"
    assert cli("run", "wordcount", "--input", topic_name, "--output", topic_name + "-out",
               "--app-id", app, "--once").exit_code == 0
    root = Path(json.loads(cli("apps", "describe", app, "--offline", "-o", "json").stdout)["state_dir"])
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "app.json").stat().st_mode) == 0o600
    assert not (root / "client.json").exists()  # run-only
    for path in root.rglob("*"):
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}"
