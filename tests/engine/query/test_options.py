"""A run's options: how many records a micro-batch takes."""

from pathlib import Path

from kstool.engine.query.options import RunOptions


def test_a_batch_takes_a_million_records_or_ten_million_that_the_source_combines_unless_told():
    """The defaults `kstool run --help` states; a given --max-records-per-batch holds for every topology."""
    default = RunOptions(app_id="app", state_dir=Path("state"))
    assert default.batch_records(combined=False) == 1_000_000
    assert default.batch_records(combined=True) == 10_000_000
    given = RunOptions(app_id="app", state_dir=Path("state"), max_records_per_batch=700)
    assert given.batch_records(combined=False) == given.batch_records(combined=True) == 700
