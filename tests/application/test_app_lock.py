"""The app lock (kstool.application.model.AppLock): one use of an app at a time, and the hook
called holding it."""

from __future__ import annotations

import os

import pytest

from kstool.application.exceptions import AppBusyError
from kstool.application.model import AppLock, AppPaths, LockHolder, hosted_for, lock_holder
from tests.conftest import cli


def test_a_second_taker_of_an_apps_lock_fails_at_once_naming_the_holder(tmp_path):
    paths = AppPaths(tmp_path, "app")
    with AppLock(paths, on_taken=None):
        with pytest.raises(AppBusyError, match=rf"'app' is already running \(pid {os.getpid()}\)"):
            with AppLock(paths, on_taken=None):
                pass
    with AppLock(paths, on_taken=None):  # let go of: free again
        pass


def test_a_run_the_engine_hosts_is_the_clients_with_the_engine_named_beside_it(tmp_path):
    """Killing the engine stops every app in it: its pid must not pass for the app's."""
    paths = AppPaths(tmp_path, "app")
    with hosted_for(4242), AppLock(paths, on_taken=None):
        assert lock_holder(paths) == LockHolder(4242, os.getpid())
        with pytest.raises(AppBusyError, match=rf"already running \(pid 4242, in the warm engine, pid {os.getpid()}\)"):
            with AppLock(paths, on_taken=None):
                pass
    assert lock_holder(paths) is None
    with AppLock(paths, on_taken=None):  # outside a hosted call: this process alone
        assert lock_holder(paths) == LockHolder(os.getpid())


def test_a_failing_hook_lets_go_of_the_lock(tmp_path):
    def refuse(paths, use):
        raise RuntimeError(f"the engine did not let go of {paths.app_id} ({use})")
    paths = AppPaths(tmp_path, "app")
    with pytest.raises(RuntimeError, match="did not let go of app"):
        with AppLock(paths, "rewrite", on_taken=refuse):
            pass
    with AppLock(paths, on_taken=None):
        pass


def test_a_new_app_whose_first_run_fails_before_it_starts_leaves_no_folder(kafka, topic_name, tmp_path):
    state_dir = tmp_path / "apps"
    failed = cli("run", "wordcount", "--input", topic_name + "-missing", "--output", topic_name + "-out",
                 "--app-id", topic_name, "--once", "--state-dir", str(state_dir))
    assert (failed.exit_code, failed.stderr) == (1, f"kstool: error: topic '{topic_name}-missing' does not exist\n")
    assert not (state_dir / topic_name).exists()
    with AppLock(AppPaths(state_dir, "kept"), on_taken=None):
        (state_dir / "kept" / "app.json").write_text("{}")  # a set-up app keeps its folder
    assert (state_dir / "kept" / "app.json").exists()
