"""Where a run runs: in this process (on Spark of its own, or a test session's) or in the warm
engine. Chosen once, at the command's edge (kstool.engine.daemon.client.run_here_or_in_engine):
the engine hands its Placement to every function it hosts (kstool.engine.daemon.server), a
function run here gets HERE. The run passes it on to its app's lock (which frees a parked query:
kstool.engine.daemon.app_use) and to its plan: its query parks there, and a JVM out of heap is
told what to do there (kstool.engine.runtime)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kstool.engine.query.parking import ParkedQueries


@dataclass(frozen=True)
class Placement:
    engine_queries: ParkedQueries | None = None  # the engine's parked queries; None: not in the engine


HERE = Placement()
