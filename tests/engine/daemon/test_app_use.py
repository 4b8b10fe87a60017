"""Every use of an app frees the warm engine's parked query on it, and every checkpoint can start
the Spark that reads it on a Hadoop file system: AppLock and the checkpoint openers take their
hooks as required arguments (a forgotten one fails at once), kstool.engine.hooks binds the
engine's own once (None would silently leave a parked query writing to a checkpoint being reset;
tests/engine/daemon/test_engine.py shows the engine giving the query up), and the packages above
the engine call what it bound, not the openers."""

from __future__ import annotations

import ast

import pytest

from kstool.application.model import AppLock, AppPaths
from tests.helpers import REPO

HOOKS = {"AppLock": ("on_taken", "free_parked_queries"),
         "app_checkpoint": ("start_spark", "start_local_spark"),
         "open_checkpoint": ("start_spark", "start_local_spark")}


def _calls() -> list[tuple[str, str, ast.Call]]:
    found = []
    for path in sorted((REPO / "kstool").rglob("*.py")):
        if path.parent.name in ("application", "checkpoint"):  # where they are defined
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in HOOKS:
                found.append((f"{path.relative_to(REPO)}:{node.lineno}", node.func.id, node))
    return found


def test_every_app_lock_and_checkpoint_in_kstool_passes_the_engines_hook():
    calls = _calls()
    assert {place.split(":")[0] for place, _, _ in calls} == {"kstool/engine/hooks.py", "kstool/engine/query/run_plan.py"}
    wrong = []
    for place, function, call in calls:
        keyword, hook = HOOKS[function]
        given = {k.arg: k.value for k in call.keywords}
        passed = given.get(keyword)
        if isinstance(passed, ast.Call) and ast.unparse(passed.func) == "partial":  # the hook with its placement bound
            passed = passed.args[0]
        if not (isinstance(passed, ast.Name) and passed.id == hook):
            wrong.append(f"{place} {function} without {keyword}={hook}")
    assert wrong == []


def test_the_operations_take_apps_and_open_checkpoints_through_the_bound_hooks():
    bound = {"lock_app", "open_app_checkpoint", "open_checkpoint_at"}
    users = {str(path.relative_to(REPO)) for path in (REPO / "kstool").rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in bound}
    assert users >= {"kstool/engine/runtime.py", "kstool/reset/apply.py", "kstool/state/restore.py",
                     "kstool/reprocess/apply.py", "kstool/apps/top.py", "kstool/state/query.py"}


def test_an_app_lock_without_its_hook_is_refused(tmp_path):
    with pytest.raises(TypeError, match="on_taken"):
        AppLock(AppPaths(tmp_path, "app"))  # type: ignore[call-arg]
