"""A module for tests/engine/spark/test_python_forks.py to run as Spark runs its Python processes
(`python -m MODULE ...`): says what it was started with, then does what its arguments say."""

import json
import os
import signal
import sys
import time

said = {"argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0], "pid": os.getpid(), "umask": os.umask(0o22),
        "probe": os.environ.get("PROBE"), "hash": hash("kstool"), "stdin": sys.stdin.read() if "read" in sys.argv else None,
        "main": __name__, "fds": sorted(os.listdir("/proc/self/fd"))}
if "wait-term" in sys.argv:
    signal.signal(signal.SIGTERM, lambda *_: (print("terminated", flush=True), sys.exit(7)))
print(json.dumps(said), flush=True)
if "wait-term" in sys.argv:
    time.sleep(120)
if "sleep" in sys.argv:
    time.sleep(120)
if "kill-self" in sys.argv:
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(int(sys.argv[1]))
