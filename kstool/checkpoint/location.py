"""Where an app's Spark checkpoint lives, and reading it.

By default the checkpoint is the `checkpoint/` folder inside the app's folder; `kstool run
--checkpoint-location URI` puts it on any Hadoop file system (file:///shared/..., hdfs://...,
s3a://...) so that executors on other hosts and a restarted driver share it. The app's folder
(manifest, lock, spark.log) stays on the machine that runs kstool.

Local checkpoints are read with plain file calls (no JVM: `apps list` stays instant); other
schemes through Hadoop's FileSystem in Spark's JVM (kstool.checkpoint.files).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlparse

from kstool.base.errors import UsageError
from kstool.checkpoint.exceptions import CheckpointLocationError


class CheckpointFiles(Protocol):
    """The files of one checkpoint, by path relative to its root ("commits", "offsets/3")."""

    uri: str

    def names(self, folder: str) -> list[str]:
        """Entries of a folder; [] when it does not exist."""

    def read_text(self, name: str) -> str: ...

    def exists(self, name: str = "") -> bool: ...

    def delete(self) -> None:
        """Delete the whole checkpoint (reset)."""

    def remove(self, name: str) -> None:
        """Delete one file; nothing when it is already gone (a rollback, kstool.reprocess)."""

    def check_usable(self) -> None:
        """Raise CheckpointLocationError when the location cannot be reached or written."""


def normalize_location(given: str) -> str:
    """--checkpoint-location as a URI: a scheme URI as given, a local path as file:///abs."""
    if "://" in given:
        parsed = urlparse(given)
        if not parsed.scheme.isalnum() or not parsed.path.strip("/"):
            raise UsageError(f"--checkpoint-location {given!r}: not a URI with a path "
                             "(e.g. file:///shared/ckpt/APP, hdfs://nn:8020/ckpt/APP)")
        return given.rstrip("/")
    if given.startswith("file:"):
        raise UsageError(f"--checkpoint-location {given!r}: write file:///absolute/path")
    return Path(given).expanduser().resolve().as_uri()


def local_path(uri: str) -> Path | None:
    """The local folder of a file: URI (None for other schemes)."""
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme in ("", "file") else None


class LocalCheckpoint:
    def __init__(self, uri: str, path: Path):
        self.uri, self.path = uri, path

    def names(self, folder: str) -> list[str]:
        target = self.path / folder
        return sorted(p.name for p in target.iterdir()) if target.is_dir() else []

    def read_text(self, name: str) -> str:
        return (self.path / name).read_text(encoding="utf-8")

    def exists(self, name: str = "") -> bool:
        return (self.path / name).exists()

    def check_usable(self) -> None:
        """Create the folder (Spark would) and write a file in it: permissions alone do not
        tell, e.g. for root or on a read-only mount."""
        probe = self.path / ".kstool-probe"
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            raise CheckpointLocationError(f"checkpoint location {self.uri}: cannot write there "
                                          f"({e.strerror}: {e.filename})") from None

    def remove(self, name: str) -> None:
        (self.path / name).unlink(missing_ok=True)

    def delete(self) -> None:
        if self.path.is_symlink():
            self.path.unlink()
        elif self.path.is_dir():
            shutil.rmtree(self.path)

