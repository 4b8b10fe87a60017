"""kstool config show: the effective client configuration, secrets masked."""

from __future__ import annotations

import click

from kstool.commands.context import Globals, pass_globals
from kstool.commands.options import output_option
from kstool.output import Column, Listing, emit


@click.group()
def config() -> None:
    """Show the effective configuration."""


@config.command()
@output_option()
@pass_globals
def show(g: Globals, output: str) -> None:
    """Bootstrap servers (and where they came from), the embedded broker profile, and the
    client properties from --command-config and -X. Secrets are masked."""
    doc = g.client_config().describe()
    rows = [{"scope": scope, "property": k, "value": v}
            for scope in ("common", "producer", "consumer", "schema_registry") for k, v in doc[scope].items()]
    title = (f"bootstrap servers: {doc['bootstrap_servers']} (from {doc['bootstrap_source']}); "
             f"profile: {doc['profile'] or 'none'}")
    emit(Listing(rows, [Column("scope"), Column("property"), Column("value")], document=doc,
                 title=title), output)
