"""The hook on the app lock (kstool.engine.daemon.app_use): every module that takes an app's
lock loads the engine's package, which sets the hook, so no use of an app can leave the warm
engine's parked query running on its checkpoint (tests/engine/test_engine.py shows the engine
giving the query up)."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO


def _lock_takers() -> list[str]:
    found = []
    for path in sorted((REPO / "kstool").rglob("*.py")):
        if "AppLock(" in path.read_text(encoding="utf-8") and path.name != "model.py":
            found.append(".".join(path.relative_to(REPO).with_suffix("").parts))
    return found


def test_every_module_that_takes_an_apps_lock_has_the_engine_free_its_parked_query():
    takers = _lock_takers()
    assert {"kstool.engine.runtime", "kstool.reset.apply", "kstool.state.restore", "kstool.reprocess.apply"} <= set(takers)
    for module in takers:  # each in a fresh interpreter: nothing else imported first
        check = subprocess.run(
            [sys.executable, "-c", f"import {module}; from kstool.application.model import AppLock; "
                                   "from kstool.engine.daemon.app_use import free_parked_queries; "
                                   "assert AppLock.on_taken is free_parked_queries"],
            capture_output=True, text=True, cwd=REPO)
        assert check.returncode == 0, f"{module}: {check.stderr}"
