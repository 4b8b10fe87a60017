"""The hook on the app lock (kstool.application.model.AppLock.on_taken): whatever takes an app
(a run, reset, restore, reprocess; in the engine or in a process of its own) first frees the
query the warm engine keeps parked for it (kstool.engine.query.parking), so a checkpoint is never used
by two queries; in this process when the lock is taken in the engine (its placement says so), else in
the engine of this kstool home."""

from __future__ import annotations

from pathlib import Path

from kstool.application.model import REWRITE, RUN, AppPaths
from kstool.engine.daemon.exceptions import EngineError, EngineNotRunningError
from kstool.engine.daemon.protocol import EnginePaths, connect, receive, send
from kstool.engine.query.placement import Placement


def free_parked_queries(paths: AppPaths, use: str, placement: Placement) -> None:
    queries = placement.engine_queries
    if queries is not None:
        if use == REWRITE:  # a parked query of any app keeps its state stores open
            queries.stop_all()
        elif use == RUN:
            queries.release(paths.root)
        # RUN_PARKED: the run resumes the app's parked query, or stops it when it cannot serve
    else:
        _ask_engine(paths.root, "free" if use == REWRITE else "release")
    if use == REWRITE:
        from kstool.engine.spark.state_stores import close_loaded_state_stores

        close_loaded_state_stores()  # in this JVM, if it ran queries on the checkpoint (a test session)


def _ask_engine(app: Path, op: str, timeout_s: float = 180.0) -> None:
    """op "release": stop the app's parked query; "free": every parked query, and close the
    state stores they leave loaded."""
    paths = EnginePaths.of_home()
    try:
        sock = connect(paths)
    except EngineNotRunningError:
        return
    with sock:
        sock.settimeout(timeout_s)
        try:
            send(sock, {"op": op, "app": str(app)})
            receive(sock)
        except (EOFError, ConnectionError):
            return  # the engine stopped meanwhile: its queries with it
        except OSError as exc:
            raise EngineError(f"the engine did not let go of {app.name} ({exc}); its log: {paths.log}") from None
