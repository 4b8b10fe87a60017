"""Records the JVM's class-data archive (kstool.engine.spark.jvmcache) after a run, off its path.

A JVM that records the archive itself (-XX:ArchiveClassesAtExit) runs slower: a first run over
1M records took 20-22 s that way against 15.8 s without (bench/notes/kafka-streams.md). So the
run's JVM only lists the classes it loads (-XX:DumpLoadedClassList, free),
and when kstool exits it leaves this recorder: once the run's JVM is gone (its list complete),
a JVM of the same class path loads the listed classes without initialising them and records
them as it exits. A later run adopts the archive. Once per kstool home and Spark version, ~25 s
after that first run (measured: the JVM's start 3 s, loading 15.5k classes 7 s, writing a
170 MB archive 13 s), at a lower priority than other work. Detached, and gone with its JVM: a
JVM that has not exited `RECORD_S` after its start is killed and leaves no archive.

`prepare_jvm_archive` records the same way, at install time (`kstool engine prepare`), from the classes
kstool's runs load (STARTUP_CLASSES: the union of a wordcount's, a windowed count's and a
stream-table join's first run on pyspark 4.3, 16k names; a class this Spark lacks is skipped)."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kstool.base.errors import KstoolError
from kstool.base.processes import pid_alive
from kstool.engine.spark.jvmcache import prepared_archive

WAIT_S = 150.0  # for the run's JVM to exit: past the reaper's grace (jvm_reaper.GRACE_S), it is gone
RECORD_S = 120.0
PREPARE_S = 600.0  # in the foreground, on a machine that may be busy installing
LOADERS = 4
STARTUP_CLASSES = Path(__file__).with_name("startup-classes.txt.gz")


def listed_classes(class_list: Path) -> list[str]:
    """The class names of a -XX:DumpLoadedClassList file (its `#` comments and `@` lines left out)."""
    names = []
    for line in class_list.read_text(errors="replace").splitlines():
        if line and line[0] not in "#@":
            names.append(line.split()[0].replace("/", "."))
    return names


def record(jvm_pid: int, class_list: Path, archive: Path, spark_home: Path | None) -> None:
    waited = time.monotonic() + WAIT_S
    while pid_alive(jvm_pid) and time.monotonic() < waited:
        time.sleep(0.2)
    try:
        names = listed_classes(class_list)
    except OSError:
        return
    finally:
        class_list.unlink(missing_ok=True)
    write_archive(names, archive, spark_home, RECORD_S)


def prepare_jvm_archive() -> Path:
    """Records this Python environment's archive (jvmcache.prepared_archive) on the installed
    pyspark's class path; replaces an earlier one only once the new one is written."""
    import pyspark

    from kstool.engine.spark.java import require_java

    target = prepared_archive(require_java())
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise KstoolError(f"cannot write the class-data archive in {target.parent}: {e.strerror}") from e
    pending = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    names = gzip.decompress(STARTUP_CLASSES.read_bytes()).decode().split()
    write_archive(names, pending, Path(pyspark.__file__).parent, PREPARE_S)
    if not pending.exists() or pending.stat().st_size == 0:
        pending.unlink(missing_ok=True)
        raise KstoolError(f"Spark's JVM wrote no class-data archive within {PREPARE_S:.0f}s")
    os.replace(pending, target)
    return target


def write_archive(names: list[str], archive: Path, spark_home: Path | None, limit_s: float) -> None:
    """A JVM of `spark_home`'s class path loads the named classes and writes them to `archive`
    as it exits; killed, and no archive, when that takes over `limit_s`."""
    from py4j.protocol import Py4JError
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    from kstool.engine.spark.session import C1_ONLY
    from kstool.engine.spark.spark_home import spark_home as with_spark_home

    # not loadDefaults: where a JVM already runs in this process (a test's session), those would
    # be its settings, its class-data archive among them, which a JVM that dumps one cannot map
    conf = SparkConf(loadDefaults=False).set("spark.driver.extraJavaOptions",
                                             f"-XX:ArchiveClassesAtExit={archive} {C1_ONLY}")
    deadline = time.monotonic() + limit_s
    with with_spark_home(spark_home):
        gateway = launch_gateway(conf, popen_kwargs={"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL})
    loader = gateway.jvm.java.lang.ClassLoader.getSystemClassLoader()
    for_name = gateway.jvm.java.lang.Class.forName  # looked up once: a lookup per call tripled the time

    def load(chunk: list[str]) -> None:
        for name in chunk:
            try:
                for_name(name, False, loader)
            except Py4JError:  # a class of the list this JVM cannot load (another loader's, a generated one)
                continue

    # a call is a round trip to the gateway: 15.5k classes took 12 s in one thread, 7 s in four
    with ThreadPoolExecutor(LOADERS) as pool:
        list(pool.map(load, [names[i::LOADERS] for i in range(LOADERS)]))
    proc = gateway.proc
    gateway.shutdown()
    proc.stdin.close()  # the gateway's JVM exits when its stdin closes, and writes the archive then
    try:
        proc.wait(max(deadline - time.monotonic(), 1.0))
    except subprocess.TimeoutExpired:
        proc.kill()
        archive.unlink(missing_ok=True)


if __name__ == "__main__":
    os.umask(0o077)  # the archive is private to the user, as the rest of kstool's home
    os.nice(10)  # its JVM too: whatever runs next (the next cron job, a test) comes first
    record(int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]) if sys.argv[4] else None)
