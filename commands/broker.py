"""kstool broker start|stop|status: the embedded Kafka-protocol broker."""

from __future__ import annotations

import click

from kstool.broker import embedded
from kstool.commands.options import output_option
from kstool.output import Column, Listing, emit, info


@click.group()
def broker() -> None:
    """Run the embedded broker (Tansu, memory only) for demos and tests."""


@broker.command()
@click.option("--port", type=click.IntRange(0, 65535), default=embedded.DEFAULT_PORT,
              show_default=True, help="Port to listen on (127.0.0.1); 0 picks a free one.")
@click.option("--foreground", is_flag=True, help="Run in the foreground until Ctrl-C.")
def start(port: int, foreground: bool) -> None:
    """Start the embedded broker in the background and print its bootstrap address."""
    state = embedded.start(port=port, foreground=foreground)
    if state.already_running:
        info(f"embedded broker already running at {state.bootstrap_servers} (pid {state.pid})")
    elif not foreground:
        info(f"embedded broker started (pid {state.pid}); log: {state.log_file}")
    if not foreground:
        click.echo(state.bootstrap_servers)


@broker.command()
def stop() -> None:
    """Stop the embedded broker (its data is memory only and is gone)."""
    before = embedded.stop()
    if before.running:
        info(f"embedded broker at {before.bootstrap_servers} (pid {before.pid}) stopped")
    else:
        info("embedded broker is not running")


@broker.command()
@output_option()
def status(output: str) -> None:
    """Show whether the embedded broker runs, its address, pid and log file."""
    state = embedded.status().to_dict()
    columns = [Column(k) for k in state]
    emit(Listing(rows=[state], columns=columns, document=state), output)
