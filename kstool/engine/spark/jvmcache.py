"""Class-data sharing for Spark's JVM, so short runs (cron's `--once`) start faster.

The first run's JVM lists the classes it loads (-XX:DumpLoadedClassList); when kstool exits,
a recorder of its own turns the list into an archive in the background (jvm_recorder: recording
in the run's own JVM slowed that run by seconds). A later run adopts the finished archive and
maps it (-XX:SharedArchiveFile), which saves seconds of class loading.
Archives live in $KSTOOL_HOME/cache, keyed by the Java and PySpark versions and the Python
environment; the JVM ignores an archive that does not match (-Xshare:auto is the default).
`kstool engine prepare` records one at install time, in the Python environment itself
(`prepared_archive`): a home without an archive of its own starts from that one, its first run
too, and records none. Set KSTOOL_JVM_CACHE=off to disable both.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

from kstool.base.home import cache_dir, private_dir, write_private_text
from kstool.base.processes import pid_alive


def _key(java_major: int, spark_home: Path | None) -> str:
    import pyspark

    # the archive is valid for one class path: the JVM's SPARK_HOME is part of it (kstool.engine.spark.spark_home)
    where = sys.prefix if spark_home is None else f"{sys.prefix}|{spark_home}"
    env = hashlib.sha256(where.encode()).hexdigest()[:10]
    return f"spark-{pyspark.__version__}-java{java_major}-{env}"


def prepared_archive(java_major: int) -> Path:
    """The archive `kstool engine prepare` records for this Python environment's pyspark, on the
    installed pyspark's class path: a JVM of any kstool home maps it (a home's SPARK_HOME links
    the same jar files, and the JVM checks the files, not the path it was given)."""
    import pyspark

    return Path(sys.prefix) / "share" / "kstool" / f"spark-{pyspark.__version__}-java{java_major}.jsa"


def _adopt_finished(cache: Path, key: str, final: Path) -> bool:
    """Promote archives whose writer has exited (its marker names the run's JVM, then the recorder
    that run left); True while one is still being written."""
    writing = False
    for marker in cache.glob(f"{key}.*.jsa.jvm-pid"):
        archive = marker.with_name(marker.name.replace(".jvm-pid", ".tmp"))
        try:
            jvm_pid = int(marker.read_text().strip() or 0)
        except (OSError, ValueError):
            jvm_pid = 0
        if jvm_pid and pid_alive(jvm_pid):
            writing = True
            continue
        if archive.exists() and archive.stat().st_size > 0 and not final.exists():
            os.replace(archive, final)
        archive.unlink(missing_ok=True)
        _class_list(archive).unlink(missing_ok=True)  # a run killed before it left its recorder
        marker.unlink(missing_ok=True)
    return writing


class JvmCache:
    def __init__(self, java_major: int, spark_home: Path | None = None):
        self.enabled = os.environ.get("KSTOOL_JVM_CACHE", "on").lower() not in ("off", "0", "no")
        self.cache = cache_dir()
        self.key = _key(java_major, spark_home)
        self.spark_home = spark_home
        self.final = self.cache / f"{self.key}.jsa"
        # without kstool's SPARK_HOME (the user's own Spark, a cluster manager's) the class path is another
        self.prepared = prepared_archive(java_major) if spark_home is not None else None
        self._pending: Path | None = None  # the archive this process's recorder is to write

    def java_option(self) -> str:
        if not self.enabled:
            return ""
        private_dir(self.cache)
        writing = _adopt_finished(self.cache, self.key, self.final)
        archive = self._archive()
        if archive is not None:
            return f"-XX:SharedArchiveFile={archive}"
        if writing:
            return ""
        self._pending = self.cache / f"{self.key}.{os.getpid()}.jsa.tmp"
        return f"-XX:DumpLoadedClassList={_class_list(self._pending)}"

    def executor_java_option(self) -> str:
        """A standalone cluster's executors map the installation's archive too, when their worker
        runs this installation's pyspark (an executor's JVM used 3.8-3.9 CPU-s against 5.7-6.3 for
        a small job). A worker elsewhere, or of a Spark of its own, does without it, silently:
        no file there, or its class path not the archive's (the JVM's warning turned off)."""
        if not self.enabled or self.prepared is None or not self.prepared.exists():
            return ""
        return f"-XX:SharedArchiveFile={self.prepared} -Xlog:cds=off,cds+dynamic=off"

    def _archive(self) -> Path | None:
        """The home's own archive, else the environment's prepared one, else None."""
        for archive in (self.final, self.prepared):
            if archive is not None and archive.exists():
                return archive
        return None

    @property
    def has_archive(self) -> bool:
        """A JVM started now maps a finished archive (after java_option())."""
        return self.enabled and self._archive() is not None

    def started(self, jvm_pid: int | None) -> None:
        """Record which process writes the pending archive (the JVM listing its classes, then the
        recorder left when this process exits), so a later run knows when it is done."""
        if self._pending is not None and jvm_pid:
            write_private_text(_marker(self._pending), str(jvm_pid))
            atexit.register(self._leave_recorder, jvm_pid)

    def _leave_recorder(self, jvm_pid: int) -> None:
        pending = cast(Path, self._pending)
        recorder = subprocess.Popen(
            [sys.executable, "-m", "kstool.engine.spark.jvm_recorder", str(jvm_pid), str(_class_list(pending)),
             str(pending), str(self.spark_home or "")],
            start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        write_private_text(_marker(pending), str(recorder.pid))


def _marker(pending: Path) -> Path:
    return pending.with_name(pending.name.replace(".tmp", ".jvm-pid"))


def _class_list(pending: Path) -> Path:
    return pending.with_name(pending.name.replace(".tmp", ".classlist"))
