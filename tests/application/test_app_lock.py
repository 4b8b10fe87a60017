"""The app lock (kstool.application.model.AppLock): one use of an app at a time, and the hook
called holding it."""

from __future__ import annotations

import os

import pytest

from kstool.application.exceptions import AppBusyError
from kstool.application.model import AppLock, AppPaths, LockHolder, hosted_for, lock_holder


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
