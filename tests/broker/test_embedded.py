"""The embedded broker's lifecycle in a home of its own, a taken port, a stopped broker never
replaced by a default address, and kcat against it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kstool.base.processes import pid_alive
from tests.conftest import cli_subprocess
from tests.helpers import REPO, create_topic, wait_until


def test_broker_lifecycle_in_its_own_home(fresh_home):
    first = cli_subprocess("broker", "start", "--port", "0")
    assert first.exit_code == 0, first.stderr
    address = first.stdout.strip()
    try:
        second = cli_subprocess("broker", "start", "--port", "0")
        assert second.exit_code == 0 and second.stdout.strip() == address
        assert "already running" in second.stderr
        status = json.loads(cli_subprocess("broker", "status", "-o", "json").stdout)
        assert status["running"] is True and status["bootstrap_servers"] == address
        # commands in this home talk to this broker without -b
        assert cli_subprocess("topics", "create", "only-here").exit_code == 0
        listed = json.loads(cli_subprocess("topics", "list", "-o", "json").stdout)
        assert [t["topic"] for t in listed] == ["only-here"]
    finally:
        stopped = cli_subprocess("broker", "stop")
    assert stopped.exit_code == 0
    status = json.loads(cli_subprocess("broker", "status", "-o", "json").stdout)
    assert status["running"] is False and status["pid"] is None


def test_a_stopped_or_dead_embedded_broker_is_never_replaced_by_the_default_address(fresh_home):
    """After `broker stop`, commands given no address went to localhost:9092, where another
    home's broker may listen (a reset would have reset a group there): they refuse instead."""
    from tests.cluster import free_ports

    address = cli_subprocess("broker", "start", "--port", "0").stdout.strip()
    assert cli_subprocess("broker", "stop").exit_code == 0
    for command in (("topics", "list"), ("reset", "--app-id", "a", "--input-topics", "t", "--yes"), ("config", "show")):
        refused = cli_subprocess(*command)
        assert refused.exit_code == 1, (command, refused.stderr)
        assert refused.stderr == (f"kstool: error: this kstool home's embedded broker ({address}) is not running: "
                                  "start it with `kstool broker start`, or name a broker with -b HOST:PORT "
                                  "(or KSTOOL_BOOTSTRAP_SERVERS)\n"), command
    closed = f"127.0.0.1:{free_ports(1)[0]}"  # an address given is tried as given
    named = cli_subprocess("topics", "list", "-b", closed, "--timeout", "2")
    assert named.exit_code == 1 and closed in named.stderr and "embedded broker" not in named.stderr
    assert cli_subprocess("topics", "list", env={"KSTOOL_BOOTSTRAP_SERVERS": closed}).exit_code == 1

    # a broker that died without `broker stop` (killed, the machine restarted) is stopped too
    restarted = cli_subprocess("broker", "start", "--port", "0")
    pid = json.loads(cli_subprocess("broker", "status", "-o", "json").stdout)["pid"]
    assert cli_subprocess("topics", "list").exit_code == 0
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(pid), "the broker to die")
    died = cli_subprocess("topics", "list")
    assert died.exit_code == 1 and f"embedded broker ({restarted.stdout.strip()}) is not running" in died.stderr


def test_a_dead_brokers_pid_taken_by_another_process_is_not_the_broker(fresh_home):
    """Pids wrap (32768 on many machines): once the broker is dead, its pid may be another
    process's, which `broker stop` must not kill nor `broker status` call the broker."""
    from kstool.broker.profile import load_profile, save_profile

    assert cli_subprocess("broker", "start", "--port", "0").exit_code == 0
    profile = load_profile()
    os.kill(profile.pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(profile.pid), "the broker to die")
    bystander = subprocess.Popen(["sleep", "300"])
    try:
        profile.pid = bystander.pid  # as if the kernel had given the broker's pid to it
        save_profile(profile)
        status = json.loads(cli_subprocess("broker", "status", "-o", "json").stdout)
        assert status["running"] is False and status["pid"] is None
        assert cli_subprocess("broker", "stop").exit_code == 0
        assert bystander.poll() is None, "broker stop killed a process that was not the broker"
    finally:
        bystander.kill()
        bystander.wait()


def test_broker_port_taken_is_a_clear_error(fresh_home):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = cli_subprocess("broker", "start", "--port", str(port))
    assert result.exit_code == 1
    assert f"port {port}" in result.stderr and "already in use" in result.stderr


def test_the_readme_s_kcat_line_reaches_the_embedded_broker(embedded_kafka, topic_name):
    """README: kcat on librdkafka 2.0.2 (Debian's) fails against the embedded broker; the line
    that preloads the wheel's librdkafka 2.16 lists its topics."""
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    kafka = embedded_kafka
    create_topic(kafka, topic_name, 1)
    line = re.search(r"^LD_PRELOAD=.* kcat -b 127\.0\.0\.1:9092 -L$", (REPO / "README.md").read_text(), re.M)
    assert line, "the README's kcat line"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    listed = subprocess.run(["bash", "-c", line.group(0).replace("127.0.0.1:9092", kafka.bootstrap)],
                            capture_output=True, text=True, timeout=60, env=env)
    assert listed.returncode == 0 and f'topic "{topic_name}"' in listed.stdout, listed.stderr
    version = subprocess.run(["kcat", "-V"], capture_output=True, text=True).stdout
    if "librdkafka 2.0." in version:  # Debian's: the failure the README names
        plain = subprocess.run(["kcat", "-b", kafka.bootstrap, "-L", "-m", "3"], capture_output=True, text=True,
                               timeout=60)
        assert plain.returncode != 0 and "Read underflow" in plain.stderr
