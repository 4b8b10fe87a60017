"""All rendering lives here: operations return data, commands hand it to `emit` (listings and
their formats), and the rest of what kstool shows: a run's progress, the `apps top` dashboard,
notes on stderr, kcat's record formats, jsonl envelopes a batch at a time, topology descriptions as text."""

from kstool.output.dashboard import Dashboard, sparkline
from kstool.output.envelope_lines import compile_batch_jsonl
from kstool.output.listings import (
    FORMATS,
    Column,
    Listing,
    dumps,
    emit,
    show_times_in,
    shown_time,
    stderr_is_tty,
    stdout_is_tty,
)
from kstool.output.messages import info, plural, warn
from kstool.output.record_format import compile_batch_format, compile_record_format
from kstool.output.run_report import RunReporter, format_counts
from kstool.output.topology_text import render_topology

__all__ = ["FORMATS", "Column", "Dashboard", "Listing", "RunReporter", "compile_batch_format", "compile_batch_jsonl",
           "compile_record_format",
           "dumps", "emit", "format_counts", "info", "plural", "render_topology", "show_times_in", "shown_time",
           "sparkline", "stderr_is_tty", "stdout_is_tty", "warn"]
