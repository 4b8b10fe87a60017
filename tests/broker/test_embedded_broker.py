"""The embedded broker's lifecycle in a home of its own, and a taken port."""

from __future__ import annotations

import json

from tests.conftest import cli_subprocess


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


def test_broker_port_taken_is_a_clear_error(fresh_home):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = cli_subprocess("broker", "start", "--port", str(port))
    assert result.exit_code == 1
    assert f"port {port}" in result.stderr and "already in use" in result.stderr
