"""kstool's home directory: embedded broker files, connection profile, app state.

Everything created here is private to the user (directories 0700, files 0600),
because profiles can hold client settings and app state holds data.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def kstool_home() -> Path:
    if os.environ.get("KSTOOL_HOME"):
        return Path(os.environ["KSTOOL_HOME"]).expanduser()
    if os.environ.get("XDG_STATE_HOME"):
        return Path(os.environ["XDG_STATE_HOME"]).expanduser() / "kstool"
    return Path.home() / ".local" / "state" / "kstool"


def cache_dir() -> Path:
    """What kstool keeps to start Spark faster (the JVM's class-data archive, its SPARK_HOME):
    rebuilt when missing. KSTOOL_CACHE shares one between homes: an archive is valid for one
    class path, and each home's own SPARK_HOME would be another."""
    if os.environ.get("KSTOOL_CACHE"):
        return Path(os.environ["KSTOOL_CACHE"]).expanduser()
    return kstool_home() / "cache"


def private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def write_private_text(path: Path, text: str, mode: int = 0o600) -> None:
    """Write atomically (temp file + rename) with `mode` (0600, or 0700 for a script) from the first byte."""
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def write_private_json(path: Path, data: Any) -> None:
    write_private_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
