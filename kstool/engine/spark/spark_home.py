"""The SPARK_HOME of the JVMs kstool starts: the installed pyspark without its bundled Python.

Spark puts $SPARK_HOME/python/lib/pyspark.zip (and py4j's zip) first on the path of every Python
process it starts: the data source's planners, the streaming source's runner, transformWithState's
pre-init runner, the task workers. Python never caches bytecode for a zip, so each of them
compiled pyspark from source: `import pyspark` took 1.46 s from the zip against 0.27 s installed.
The zip holds the installed pyspark's own code; a folder that links everything of the installed
pyspark but its `python/` lets those processes import the installed, compiled copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Iterator

from kstool.base.home import cache_dir, private_dir

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


@contextlib.contextmanager
def spark_home(home: Path | None) -> Iterator[None]:
    """SPARK_HOME set to `home` while a JVM is launched (pyspark reads it from the environment),
    then as it was: kstool's own later work, and the processes it starts, see no change."""
    if home is None:
        yield
        return
    previous = os.environ.get("SPARK_HOME")
    os.environ["SPARK_HOME"] = str(home)
    try:
        yield
    finally:
        if previous is None:
            del os.environ["SPARK_HOME"]
        else:
            os.environ["SPARK_HOME"] = previous
