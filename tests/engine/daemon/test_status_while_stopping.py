"""`kstool engine status` at the moment the engine stops serving: a connection it has not taken
yet is reset when it closes its socket, which it then removes (kstool.engine.daemon.server);
status says the engine is not running, not that it did not answer."""

from __future__ import annotations

import select
import socket
import threading

import pytest

from kstool.engine.daemon.client import engine_status
from kstool.engine.daemon.exceptions import EngineError
from kstool.engine.daemon.protocol import EnginePaths


def _engine(paths: EnginePaths, then_stops: bool) -> threading.Thread:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(paths.socket))
    server.listen()

    def serve() -> None:
        if then_stops:  # a connection waits to be taken as the engine closes its socket: it is reset
            select.select([server], [], [])
            server.close()
            paths.socket.unlink()
            return
        for _ in range(2):  # an engine that takes connections and answers none
            server.accept()[0].close()
        server.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_status_as_the_engine_stops_says_it_is_not_running(tmp_path):
    paths = EnginePaths(tmp_path)
    serving = _engine(paths, then_stops=True)
    assert engine_status(paths, timeout_s=5) == {"running": False}
    serving.join(5)


def test_an_engine_that_answers_no_one_is_still_an_error(tmp_path):
    paths = EnginePaths(tmp_path)
    serving = _engine(paths, then_stops=False)
    with pytest.raises(EngineError, match="the engine did not answer"):
        engine_status(paths, timeout_s=5)
    serving.join(5)
