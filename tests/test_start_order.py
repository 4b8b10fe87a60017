"""tests/start_order.txt names modules of the suite: one renamed or removed would silently start
late (the order `make test`'s workers take modules in: conftest.pytest_collection_modifyitems)."""

from __future__ import annotations

from pathlib import Path

from tests.cpu_use import start_order_ranks

REPO = Path(__file__).resolve().parent.parent


def test_every_module_the_start_order_names_is_a_test_module():
    modules = start_order_ranks()
    assert len(modules) >= 10
    assert [m for m in modules if not (REPO / m).is_file() or not Path(m).name.startswith("test_")] == []
