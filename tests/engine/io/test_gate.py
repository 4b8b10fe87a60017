"""A parked query's gate (kstool.engine.io.gate): a trigger waiting at a shut gate takes what a
run opens it to, or nothing when it is closed, as soon as the doorbell rings, not when its wait
runs out; a shut gate still shut at the end of the wait reads as None."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from kstool.engine.io import gate as gates
from tests.helpers import wait_until

TARGET = {"orders": {"0": 10, "1": 7}}
LONG_WAIT_S = 300.0  # a waiter not woken by the bell would hold the test this long
HANG_GUARD_S = 60.0


def _waiting(gate) -> tuple[threading.Thread, list]:
    """A trigger waiting at the shut gate (its doorbell made, and a moment to sit down at it)."""
    seen: list = []
    waiter = threading.Thread(target=lambda: seen.append(gates.wait_for_gate(str(gate), LONG_WAIT_S)), daemon=True)
    waiter.start()
    wait_until(lambda: Path(f"{gate}.bell").exists(), "the waiter's doorbell")
    time.sleep(0.2)
    return waiter, seen


def test_a_waiting_trigger_takes_what_a_run_opens_the_gate_to(tmp_path):
    gate = tmp_path / "gate.json"
    waiter, seen = _waiting(gate)
    gates.open_gate(gate, TARGET)
    waiter.join(HANG_GUARD_S)
    assert not waiter.is_alive() and seen == [{("orders", 0): 10, ("orders", 1): 7}]


def test_a_closed_gate_lets_a_waiting_trigger_go_with_nothing(tmp_path):
    gate = tmp_path / "gate.json"
    waiter, seen = _waiting(gate)
    gates.close_gate(gate)
    waiter.join(HANG_GUARD_S)
    assert not waiter.is_alive() and seen == [{}]


def test_a_shut_gate_reads_as_none_when_the_wait_runs_out_and_an_open_one_at_once(tmp_path):
    gate = tmp_path / "gate.json"
    assert gates.wait_for_gate(str(gate), 0.05) is None
    gates.open_gate(gate, TARGET)
    assert gates.wait_for_gate(str(gate), LONG_WAIT_S) == {("orders", 0): 10, ("orders", 1): 7}
    gates.shut_gate(gate)
    assert gates.wait_for_gate(str(gate), 0.05) is None
