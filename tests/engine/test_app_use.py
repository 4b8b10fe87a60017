"""The hooks kstool.engine fills where it loads: every module that takes an app's lock or opens
a checkpoint loads it, so no use of an app can leave the warm engine's parked query running on
its checkpoint (tests/engine/test_engine.py shows the engine giving the query up), and a
checkpoint on a Hadoop file system can always start the Spark that reads it."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO

HOOKS_SET = ("from kstool.application.model import AppLock; from kstool.checkpoint import files; "
             "from kstool.engine.daemon.app_use import free_parked_queries; "
             "from kstool.engine.session import start_local_spark; "
             "assert AppLock.on_taken is free_parked_queries and files.start_spark is start_local_spark")


def _modules_using(*calls: str) -> list[str]:
    found = []
    for path in sorted((REPO / "kstool").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if any(call in text for call in calls) and path.parent.name not in ("application", "checkpoint"):
            found.append(".".join(path.relative_to(REPO).with_suffix("").parts))
    return found


def test_every_module_that_takes_an_app_or_opens_a_checkpoint_has_the_engines_hooks():
    users = _modules_using("AppLock(", "app_checkpoint(", "open_checkpoint(")
    assert {"kstool.engine.runtime", "kstool.reset.apply", "kstool.state.restore", "kstool.reprocess.apply",
            "kstool.apps.top"} <= set(users)
    for module in users:  # each in a fresh interpreter: nothing else imported first
        check = subprocess.run([sys.executable, "-c", f"import {module}; {HOOKS_SET}"],
                               capture_output=True, text=True, cwd=REPO)
        assert check.returncode == 0, f"{module}: {check.stderr}"
