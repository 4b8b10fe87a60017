"""The state shared by all commands: global options and the Kafka clients built from them."""

from __future__ import annotations

from dataclasses import dataclass, field

import click

from kstool.config import ClientConfig, build_client_config


@dataclass
class Globals:
    bootstrap: str | None = None
    command_config: str | None = None
    overrides: tuple[str, ...] = ()
    timeout_s: float = 10.0
    debug: bool = False
    _config: ClientConfig | None = field(default=None, repr=False)

    def client_config(self) -> ClientConfig:
        if self._config is None:
            self._config = build_client_config(
                self.bootstrap, self.command_config, self.overrides, self.timeout_s, self.debug)
        return self._config

    def clients(self):
        from kstool.kafka.client import KafkaClients

        return KafkaClients(self.client_config())


pass_globals = click.make_pass_decorator(Globals)
