"""The state shared by all commands: global options and the Kafka clients built from them.

The connection options (-b, --command-config, -X, --timeout, --debug) and --tz are accepted before the
command and after it alike (`kstool -b H topics list` = `kstool topics list -b H`), as Kafka's
tools and kcat take them: every command of the tree carries them, and each one given fills the
one Globals object of the invocation.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from kstool.base.timeutil import time_zone
from kstool.config import ClientConfig, build_client_config
from kstool.output import show_times_in, warn

if TYPE_CHECKING:
    from kstool.kafka.client import KafkaClients

DEFAULT_TIMEOUT_S = 10.0


@dataclass
class Globals:
    bootstrap: str | None = None
    command_config: str | None = None
    overrides: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    debug: bool = False
    tz: str | None = None
    _config: ClientConfig | None = field(default=None, repr=False)

    def client_config(self) -> ClientConfig:
        if self._config is None:
            self._config = build_client_config(
                self.bootstrap, self.command_config, self.overrides, self.timeout_s, self.debug)
            ignored = self._config.ignored_properties
            if ignored:
                warn(f"{self.command_config}: left out {', '.join(ignored)} "
                     "(Java client properties librdkafka does not take)")
        return self._config

    def clients(self) -> KafkaClients:
        from kstool.kafka.client import KafkaClients

        return KafkaClients(self.client_config())


pass_globals = click.make_pass_decorator(Globals, ensure=True)


def _store(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    if value is None or value == () or value is False:
        return
    g = ctx.find_root().ensure_object(Globals)  # one object, whichever command took the option
    if param.name == "overrides":
        g.overrides = (*g.overrides, *value)
    else:
        setattr(g, param.name, value)
    if param.name == "tz":
        show_times_in(time_zone(value))
    if param.name == "debug":
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, force=True,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")


def global_options() -> list[click.Option]:
    """Fresh option objects for one command (click binds each to its command)."""
    common: dict[str, Any] = {"expose_value": False, "callback": _store, "is_eager": True}
    return [
        click.Option(["-b", "--bootstrap-servers", "--bootstrap-server", "bootstrap"],
                     metavar="HOST:PORT[,...]",
                     help="Kafka bootstrap servers. [env KSTOOL_BOOTSTRAP_SERVERS; else the running "
                          "embedded broker (an error when it is stopped); else localhost:9092]", **common),
        click.Option(["--command-config", "command_config"], type=click.Path(dir_okay=False),
                     metavar="FILE", help="Client properties file (Java .properties, as Kafka's "
                                          "tools take: security settings etc.).", **common),
        click.Option(["-X", "overrides"], multiple=True, metavar="KEY=VALUE",
                     help="Client property override (repeatable), like kcat -X.", **common),
        click.Option(["--timeout", "timeout_s"], type=click.FloatRange(min=0.1), metavar="SECONDS",
                     help=f"Seconds to wait for the broker before giving up. [default: "
                          f"{DEFAULT_TIMEOUT_S:g}]", **common),
        click.Option(["--debug", "debug"], is_flag=True, help="Show tracebacks and client logs.",
                     **common),
        click.Option(["--tz", "tz"], metavar="ZONE", help="Tables show times in this zone (Europe/Paris, local) "
                                                          "instead of UTC; json, jsonl and csv keep epoch ms.",
                     **common),
    ]


GLOBAL_OPTION_NAMES = {"bootstrap", "command_config", "overrides", "timeout_s", "debug", "tz"}


def finish_command(command: click.Command, path: str) -> None:
    """Give COMMAND the global options and its --help examples."""
    from kstool.commands.examples import epilog

    command.params.extend(global_options())
    command.epilog = epilog(path)


def finish_tree(command: click.Command, path: str) -> None:
    """finish_command for COMMAND and every command below it."""
    finish_command(command, path)
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            finish_tree(sub, f"{path} {name}".strip())
