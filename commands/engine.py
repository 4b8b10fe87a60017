"""kstool engine start|stop|status: the warm engine that runs, reprocesses and state reads use;
kstool engine prepare: what Spark's JVMs start from, recorded once at install time."""

from __future__ import annotations

import time

import click

from kstool.commands.options import output_option
from kstool.engine import (
    DEFAULT_MAX_PARKED,
    IDLE_ENV,
    EngineSettings,
    SparkOptions,
    checked_heap,
    engine_status,
    idle_timeout_from_env,
    parse_idle_timeout,
    prepare_jvm_archive,
    start_engine,
    stop_engine,
)
from kstool.output import Column, Listing, emit, info


@click.group()
def engine() -> None:
    """A warm Spark engine for this kstool home: `run`, `reprocess` and the checkpoint-backed
    `state` reads use it, and start it when none runs; it stops after an idle time
    (--no-engine or KSTOOL_ENGINE=off: neither use nor start it)."""


@engine.command()
@click.option("--master", default=SparkOptions.master, show_default=True,
              help="Spark master URL the engine's session runs on (a cluster's spark://... too).")
@click.option("--wait", "start_timeout", type=click.FloatRange(min=1), default=300, show_default=True,
              metavar="SECONDS", help="How long to wait for the engine's Spark session.")
@click.option("--idle-timeout", metavar="DURATION",
              help=f"Stop after this long with nothing to run; 0: never [default: ${IDLE_ENV}, else 30m].")
@click.option("--driver-memory", metavar="SIZE",
              help="The engine's JVM heap, e.g. 4g [default: a quarter of the machine's memory, 1g to 4g].")
@click.option("--max-parked", type=click.IntRange(min=0), default=DEFAULT_MAX_PARKED, show_default=True,
              help="Apps whose query the engine keeps between --once runs; past it the least recently used stops.")
def start(master: str, start_timeout: float, idle_timeout: str | None, driver_memory: str | None, max_parked: int) -> None:
    """Start the engine in the background; prints its pid once it serves."""
    idle_ms = idle_timeout_from_env() if idle_timeout is None else parse_idle_timeout(idle_timeout)
    heap = checked_heap(driver_memory) if driver_memory is not None else None
    state = start_engine(EngineSettings(master, idle_ms, heap, max_parked), start_timeout)
    info(f"engine started (pid {state['pid']}, master {state['master']}); log: {state['log']}")
    click.echo(state["pid"])


@engine.command()
def stop() -> None:
    """Stop the engine; runs it hosts stop after their current batch."""
    last = stop_engine()
    info(f"engine (pid {last['pid']}) stopped" if last["running"] else "the engine is not running")


@engine.command()
@output_option()
def status(output: str) -> None:
    """Whether the engine runs: pid, uptime, master, JVM heap, the runs it hosts, the apps whose
    query it keeps parked between --once runs."""
    state = engine_status()
    row = {k: v for k, v in state.items() if k not in ("runs", "parked")}
    extra = ([Listing(state["runs"], [Column("name"), Column("client_pid", justify="right"),
                                      _column("running_s")])] if state.get("runs") else [])
    if state.get("parked"):
        extra.append(Listing([{"parked_app": folder} for folder in state["parked"]], [Column("parked_app")]))
    emit(Listing([row], [_column(k) for k in row], document=state, extra_tables=extra), output)


def _column(key: str) -> Column:
    """Sizes and durations readable in the table (the JSON keeps bytes and seconds)."""
    for suffix, kind in (("_bytes", "bytes"), ("_s", "seconds")):
        if key.endswith(suffix):
            return Column(key, key[:-len(suffix)].upper().replace("_", " "), justify="right", kind=kind)
    return Column(key)


@engine.command()
def prepare() -> None:
    """Record the class-data archive Spark's JVMs start from, for this installation (once after
    installing or upgrading; ~25 s): every kstool home's runs map it, the first one too (without
    it, a home's first run starts seconds slower and records one of its own after it)."""
    started = time.monotonic()
    archive = prepare_jvm_archive()
    info(f"class-data archive {archive} ({archive.stat().st_size / 1e6:.0f} MB) recorded in {time.monotonic() - started:.1f}s")
