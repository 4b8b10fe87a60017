"""The README's tour runs as written on a fresh machine: its block, line for line, in a fresh
kstool home (the broker it starts listens on a free port instead of :9092), with the warm
engine on as an operator has it; what it prints is checked against the inputs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import home_sharing_jvm_archive
from tests.helpers import REPO


def tour_block() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^## A short tour\n+```sh\n(.*?)^```", text, re.S | re.M)
    assert block, "README.md has no tour block"
    return block.group(1).splitlines()


@pytest.fixture
def tour_home(jvm_archive, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KSTOOL_BOOTSTRAP_SERVERS"}
    env.update(home_sharing_jvm_archive(tmp_path), KSTOOL_ENGINE="on",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    yield env
    for stop in (["engine", "stop"], ["broker", "stop"]):  # whatever a failed tour left running
        subprocess.run([sys.executable, "-m", "kstool.commands.main", *stop], env=env, capture_output=True, timeout=60)


def test_the_readme_tour_runs_as_written(tour_home, tmp_path):
    lines = [line.replace("kstool broker start", "kstool broker start --port 0", 1) for line in tour_block()]
    work = tmp_path / "work"
    work.mkdir()
    (work / "scripts").symlink_to(REPO / "scripts")  # the tour runs from a checkout's root
    script = "set -euo pipefail\n" + "\n".join(lines) + "\n"
    done = subprocess.run(["bash", "-c", script], cwd=work, env=tour_home, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.splitlines()

    text = (REPO / "scripts/data/gettysburg-address.txt").read_text(encoding="utf-8")
    words = Counter(w for w in re.split(r"\W+", text.lower()) if w)
    counted = dict(re.fullmatch(r"(\w+)=(\d+)", line).groups() for line in out if re.fullmatch(r"\w+=\d+", line))
    assert {w: int(n) for w, n in counted.items()} == dict(words)  # each word's last update is its count

    # the clicks of 20 minutes ago, counted once their window closed: user42 twice, user7 once
    windows = [json.loads(line) for line in out if line.startswith('{"topic":"clicks-per-5m"')]
    assert sorted((w["key"]["key"], w["value"]) for w in windows) == [("user42", 2), ("user7", 1)]
    assert len({w["key"]["start"] for w in windows}) == 1
    assert any(re.match(r"user7\s+1\s", line) for line in out)  # its open window, from the store
    assert "not found: no window of 'user42' in the store; closed windows leave it" in done.stderr
    assert "--from-changelog reads them" in done.stderr and "exit 1" in out
    assert any(re.match(r"user42\s+2\s", line) for line in out)  # its closed one, from the changelog

    assert [line for line in out if line.startswith(("c1 ", "c2 "))] == [
        'c1 {"left":{"order":1},"right":{"name":"Ada"}}', 'c2 {"left":{"order":2},"right":null}']
    sliced = (work / "slice.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(sliced) == len(text.splitlines())
    assert f"wrote {len(sliced)} record(s) to lines-copy" in done.stderr
