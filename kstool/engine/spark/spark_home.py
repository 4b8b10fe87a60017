"""The SPARK_HOME of the JVMs kstool starts: the installed pyspark without its bundled Python.

Spark puts $SPARK_HOME/python/lib/pyspark.zip (and py4j's zip) first on the path of every Python
process it starts: the data source's planners, the streaming source's runner, transformWithState's
pre-init runner, the task workers. Python never caches bytecode for a zip, so each of them
compiled pyspark from source: `import pyspark` took 1.46 s from the zip against 0.27 s installed.
The zip holds the installed pyspark's own code; a folder that links everything of the installed
pyspark but its `python/` lets those processes import the installed, compiled copy.

Spark also puts its spark-core jar on that path, which holds no Python: each process read the
jar's directory (~6,000 entries) when it first walked its path, and again when pyspark's
setup_spark_files invalidated the import caches. A local run's processes start through a
launcher that leaves the jar out (python_for).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import sys
from pathlib import Path
from typing import Iterator

from kstool.base.home import cache_dir, private_dir, write_private_text
from kstool.base.processes import inherited_variable

# masters whose Spark finds its Python in the environment; YARN ships $SPARK_HOME/python/lib/pyspark.zip
# to its containers and refuses to start without it
_MASTERS_WITHOUT_THE_ZIP = ("local", "spark://")


def spark_home_for(master: str) -> Path | None:
    """The folder to give a new JVM as SPARK_HOME, or None to leave SPARK_HOME as it is (set by
    the user: their own Spark; or a cluster manager that needs the zip)."""
    if os.environ.get("SPARK_HOME") or not master.startswith(_MASTERS_WITHOUT_THE_ZIP):
        return None
    import pyspark

    installed = Path(pyspark.__file__).parent
    home = private_dir(cache_dir()) / f"spark-home-{hashlib.sha256(str(installed).encode()).hexdigest()[:10]}"
    home.mkdir(exist_ok=True)
    for entry in installed.iterdir():
        if entry.name != "python":
            with contextlib.suppress(FileExistsError):  # another kstool made it first
                (home / entry.name).symlink_to(entry)
    return home


_RELAY = Path(__file__).with_name("python_forks_relay.py")

# sh, not Python: what costs is Python walking its path when it starts (set -f: the entries are
# not glob patterns)
_LAUNCHER = """#!/bin/sh
# kstool: this Python, without the jars Spark puts on PYTHONPATH (kstool.engine.spark.spark_home)
set -f
path=
IFS=:
for entry in $PYTHONPATH; do
  case $entry in *.jar) ;; *) path=${path:+$path:}$entry ;; esac
done
PYTHONPATH=$path
export PYTHONPATH
# a module's process forked by kstool's fork server, when one runs (kstool.engine.spark.python_forks)
if [ -n "$KSTOOL_PYTHON_FORKS" ] && [ "$1" = -m ]; then
  exec %(python)s -S -I %(relay)s "$@"
fi
exec %(python)s "$@"
"""


def python_for(master: str) -> str:
    """The Python executable for the processes Spark starts: this interpreter (they import
    kstool and confluent-kafka), through the launcher for a local master (a cluster's workers may
    not see kstool's cache); this interpreter itself where the launcher cannot run (a noexec cache)."""
    if not master.startswith("local"):
        return sys.executable
    launcher = private_dir(cache_dir()) / f"python-{hashlib.sha256(sys.executable.encode()).hexdigest()[:10]}"
    text = _LAUNCHER % {"python": shlex.quote(sys.executable), "relay": shlex.quote(str(_RELAY))}
    if not launcher.is_file() or launcher.read_text(encoding="utf-8") != text:
        write_private_text(launcher, text, mode=0o700)  # another kstool may be starting it
    return str(launcher) if os.access(launcher, os.X_OK) else sys.executable


@contextlib.contextmanager
def spark_home(home: Path | None) -> Iterator[None]:
    """SPARK_HOME set to `home` while a JVM is launched (pyspark reads it from the environment),
    then as it was."""
    if home is None:
        yield
        return
    with inherited_variable("SPARK_HOME", str(home)):
        yield
