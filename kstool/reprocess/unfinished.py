"""A reprocess whose run did not finish (a signal, a failure), kept in its app's folder from its
rollback (or reset) on: what `reprocess --resume` needs to go on from where the app stands
instead of rolling it back and rewriting everything again. A reprocess that finishes forgets it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from kstool.application.model import AppPaths

FILE = "reprocess.json"
TP = tuple[str, int]


@dataclass
class Unfinished:
    mode: str  # the interrupted reprocess' own: rollback, beginning or partial
    from_time: int | None
    to_time: int | None
    stop_offsets: dict[TP, int]  # where its run was to stop (empty: the inputs' ends)


def remember(paths: AppPaths, unfinished: Unfinished) -> None:
    """Written before the run starts and replaced atomically: a crash leaves the old or the new."""
    paths.root.mkdir(parents=True, exist_ok=True)
    document = {"mode": unfinished.mode, "from_time": unfinished.from_time, "to_time": unfinished.to_time,
                "stop_offsets": [[t, p, o] for (t, p), o in sorted(unfinished.stop_offsets.items())]}
    part = paths.root / (FILE + ".part")
    part.write_text(json.dumps(document) + "\n")
    os.replace(part, paths.root / FILE)


def recall(paths: AppPaths) -> Unfinished | None:
    try:
        document = json.loads((paths.root / FILE).read_text())
    except FileNotFoundError:
        return None
    return Unfinished(document["mode"], document["from_time"], document["to_time"],
                      {(t, p): o for t, p, o in document["stop_offsets"]})


def forget(paths: AppPaths) -> None:
    (paths.root / FILE).unlink(missing_ok=True)
