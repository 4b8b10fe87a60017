"""A real Spark standalone cluster for tests: a master and workers started from the installed
pyspark. Each worker runs in its own mount namespace with the kstool home (and its cache) hidden
under empty tmpfs mounts, so it sees the driver's files as another host would: only shared paths."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports, picked at random below the kernel's ephemeral range: a port
    the OS hands out (bind to 0) is one any client's connection may take as its own before the
    JVM we give it to binds it (an Apache Kafka broker's listener once was, "Address already in
    use", and its worker's 360 tests errored), and a port just closed can come back for the
    next asker (the Spark master's UI port was once a worker's)."""
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    pick = random.SystemRandom()
    ports: list[int] = []
    while len(ports) < count:
        port = pick.randrange(max(1024, ephemeral_low - 20000), ephemeral_low)
        if port in ports:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use
        ports.append(port)
    return ports


def unshare_problem() -> str | None:
    """Why a worker cannot get its own mount namespace here (None: it can)."""
    if shutil.which("unshare") is None:
        return "unshare is not installed"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "mount", "-t", "tmpfs", "tmpfs", "/mnt"],
                           capture_output=True, text=True)
    return None if probe.returncode == 0 else f"unshare -m is not permitted: {probe.stderr.strip()}"


def _daemon_java_options(spark_home: Path) -> str:
    """The master's and workers' JVMs map the installation's class-data archive as its executors
    do (their class path is the same pyspark's): with the suite's C1, a worker's start took 1.7
    CPU-s instead of 2.7, measured 3 times each; the tests start a dozen."""
    from kstool.engine.spark.java import require_java
    from kstool.engine.spark.jvmcache import JvmCache

    return JvmCache(require_java(), spark_home).executor_java_option()


class SparkCluster:
    """A master and `workers` workers of `cores` cores each. Given `hidden` (the kstool home and
    its cache), every worker runs in its own mount namespace with its own empty tmpfs over each,
    so that no worker sees the driver's files nor another worker's."""

    def __init__(self, work: Path, hidden: list[Path], workers: int = 2, cores: int = 1):
        import pyspark

        self.spark_home = Path(pyspark.__file__).parent
        self.work, self.hidden, self.cores = work, hidden, cores
        self.env = {**os.environ, "SPARK_HOME": str(self.spark_home), "PYSPARK_PYTHON": sys.executable,
                    "SPARK_LOG_DIR": str(work), "SPARK_NO_DAEMONIZE": "1", "SPARK_DAEMON_JAVA_OPTS": _daemon_java_options(self.spark_home)}
        self.port, self.ui_port, *self.worker_ui_ports = free_ports(2 + workers)
        self.url = f"spark://127.0.0.1:{self.port}"
        self.master = self._spawn("master", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
            "--webui-port", str(self.ui_port)])
        self.workers: list[subprocess.Popen | None] = [None] * workers
        try:
            self.start_workers()
        except BaseException:  # no fixture gets the cluster to stop: what started stops here
            self.stop()
            raise

    def _spawn(self, name: str, args: list[str], hide: bool = False) -> subprocess.Popen:
        command = [str(self.spark_home / "bin" / "spark-class"), *args]
        if hide:  # the worker must not see the driver's kstool home
            script = " && ".join([*(f'mount -t tmpfs tmpfs "{path}"' for path in self.hidden), 'exec "$@"'])
            command = ["unshare", "-m", "--propagation", "private", "bash", "-c", script, "worker", *command]
        log = open(self.work / f"{name}.log", "ab")
        # its scratch files (and its executors', which inherit its environment) here, not in /tmp,
        # where the killed ones would stay: the tests kill workers
        scratch = self.work / f"{name}-tmp"
        scratch.mkdir(exist_ok=True)
        env = {**self.env, "SPARK_LOCAL_DIRS": str(scratch),
               "JAVA_TOOL_OPTIONS": f"{self.env.get('JAVA_TOOL_OPTIONS', '')} -Djava.io.tmpdir={scratch}".strip()}
        return subprocess.Popen(command, env=env, stdout=log, stderr=log, start_new_session=True)

    def start_workers(self, timeout: float = 120) -> None:
        """Start every worker that is not running and wait until all have registered."""
        for index, worker in enumerate(self.workers):
            if worker is None or worker.poll() is not None:
                self.workers[index] = self._spawn(f"worker{index}", [
                    "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                    "--cores", str(self.cores), "--memory", "2g", "--work-dir", str(self.worker_dir(index)),
                    "--webui-port", str(self.worker_ui_ports[index])], hide=bool(self.hidden))
        deadline = time.monotonic() + timeout
        while self.alive_workers() < len(self.workers):
            for index, worker in enumerate(self.workers):
                assert worker is not None and worker.poll() is None, \
                    (self.work / f"worker{index}.log").read_text()[-2000:]
            assert time.monotonic() < deadline, f"not every worker registered with {self.url} in {timeout}s"
            time.sleep(0.5)

    def worker_dir(self, index: int) -> Path:
        return self.work / f"worker{index}"

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as response:
                status = json.load(response)
        except OSError:
            return 0
        except ValueError:
            # Spark's WebUI.bind listens before it attaches its pages one by one: for a moment
            # the master's "/" page answers "/json/" with HTML
            return 0
        return sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")

    def executor_log(self, index: int) -> str:
        """What the executors that ran on worker `index` logged (Spark's default level)."""
        return "".join(p.read_text(errors="replace") for p in self.worker_dir(index).glob("app-*/*/stderr"))

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker `index` and its executors, as when a host dies."""
        worker = self.workers[index]
        if worker is not None and worker.poll() is None:
            alive = self.alive_workers()
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
            deadline = time.monotonic() + 120  # the master notices the worker's connection drop
            while self.alive_workers() >= alive and time.monotonic() < deadline:
                time.sleep(0.5)

    def kill_workers(self) -> None:
        for index in range(len(self.workers)):
            self.kill_worker(index)

    def stop(self) -> None:
        for proc in (*self.workers, self.master):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
