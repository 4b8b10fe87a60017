"""kstool.engine.spark.scratch: a JVM's scratch folder stays while its run or its JVM holds the lock,
and goes at the next start once neither does. What a killed run leaves is checked through
Spark in tests/engine/test_killed_runs.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from kstool.engine.spark.scratch import LOCK_NAME, UNLOCKED_GRACE_S, ScratchDir, sweep

_HOLD = "import sys; sys.stdin.read()"  # holds what it inherited until its stdin closes


def test_a_folder_stays_while_a_child_holds_its_lock_and_goes_once_none_does(tmp_path):
    scratch = ScratchDir(tmp_path)
    (scratch.path / "librocksdbjni123.so").write_bytes(b"\0" * 1024)
    child = subprocess.Popen([sys.executable, "-c", _HOLD], stdin=subprocess.PIPE, pass_fds=(scratch.lock_fd,))
    try:
        os.close(scratch.lock_fd)  # the run has exited; its JVM (here a child) still runs
        assert sweep(tmp_path) == [] and scratch.path.is_dir()
    finally:
        child.communicate(b"")
    assert sweep(tmp_path) == [scratch.path] and not scratch.path.exists()


def test_a_new_folder_sweeps_the_ended_ones_and_keeps_the_live_ones(tmp_path):
    live, ended = ScratchDir(tmp_path), ScratchDir(tmp_path)
    os.close(ended.lock_fd)
    third = ScratchDir(tmp_path)
    assert live.path.is_dir() and third.path.is_dir() and not ended.path.exists()
    assert (tmp_path / third.path.name / LOCK_NAME).exists()


def test_a_folder_without_its_lock_goes_only_when_old(tmp_path):
    """A run killed between making its folder and locking it."""
    young, old = tmp_path / "jvm-young", tmp_path / "jvm-old"
    young.mkdir()
    old.mkdir()
    long_ago = time.time() - UNLOCKED_GRACE_S - 60
    os.utime(old, (long_ago, long_ago))
    assert sweep(tmp_path) == [old]
    assert young.is_dir() and not old.exists()
