"""A real Spark standalone cluster for tests: a master and one worker started from the installed
pyspark. The worker runs in its own mount namespace with the kstool home hidden under an empty
tmpfs, so it sees the driver's files as a second host would: only shared paths."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unshare_problem() -> str | None:
    """Why a worker cannot get its own mount namespace here (None: it can)."""
    if shutil.which("unshare") is None:
        return "unshare is not installed"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "mount", "-t", "tmpfs", "tmpfs", "/mnt"],
                           capture_output=True, text=True)
    return None if probe.returncode == 0 else f"unshare -m is not permitted: {probe.stderr.strip()}"


class SparkCluster:
    def __init__(self, work: Path, hidden: Path):
        import pyspark

        self.spark_home = Path(pyspark.__file__).parent
        self.work, self.hidden = work, hidden
        self.env = {**os.environ, "SPARK_HOME": str(self.spark_home), "PYSPARK_PYTHON": sys.executable,
                    "SPARK_LOG_DIR": str(work), "SPARK_NO_DAEMONIZE": "1"}
        self.port, self.ui_port, self.worker_ui_port = free_port(), free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.master = self._spawn("master", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
            "--webui-port", str(self.ui_port)])
        self.worker: subprocess.Popen | None = None
        self.start_worker()

    def _spawn(self, name: str, args: list[str], hide: bool = False) -> subprocess.Popen:
        command = [str(self.spark_home / "bin" / "spark-class"), *args]
        if hide:  # the worker must not see the driver's kstool home
            script = f'mount -t tmpfs tmpfs "{self.hidden}" && exec "$@"'
            command = ["unshare", "-m", "--propagation", "private", "bash", "-c", script, "worker", *command]
        log = open(self.work / f"{name}.log", "ab")
        return subprocess.Popen(command, env=self.env, stdout=log, stderr=log, start_new_session=True)

    def start_worker(self, timeout: float = 120) -> None:
        self.worker = self._spawn("worker", [
            "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1", "--cores", "2",
            "--memory", "2g", "--work-dir", str(self.work / "worker"), "--webui-port", str(self.worker_ui_port)],
            hide=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.alive_workers() == 1:
                return
            assert self.worker.poll() is None, (self.work / "worker.log").read_text()[-2000:]
            time.sleep(0.5)
        raise AssertionError(f"no worker registered with {self.url} in {timeout}s")

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as response:
                status = json.load(response)
        except OSError:
            return 0
        return sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")

    def kill_worker(self) -> None:
        """SIGKILL the worker and its executors, as when a host dies."""
        if self.worker is not None and self.worker.poll() is None:
            os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait()
        deadline = time.monotonic() + 120  # the master notices a dead worker by its heartbeat
        while self.alive_workers() and time.monotonic() < deadline:
            time.sleep(0.5)

    def stop(self) -> None:
        for proc in (self.worker, self.master):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
