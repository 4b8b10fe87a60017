"""kstool completion bash|zsh|fish, and the dynamic completers commands attach to arguments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

import click
from click.shell_completion import CompletionItem, get_completion_class

if TYPE_CHECKING:
    from kstool.kafka.client import KafkaClients

# what click calls to complete a parameter
Completer = Callable[[click.Context, click.Parameter, str], list[CompletionItem]]

SHELLS = ("bash", "zsh", "fish")
PROG = "kstool"
ENV_VAR = "_KSTOOL_COMPLETE"


def completion_script(shell: str) -> str:
    from kstool.commands.main import cli

    completer = get_completion_class(shell)
    assert completer is not None, shell  # SHELLS are click's own
    return completer(cli, {}, PROG, ENV_VAR).source()


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script for SHELL (see README: where to install it)."""
    click.echo(completion_script(shell), nl=False)


def _quiet(fetch: Callable[[click.Context], Iterable[str]]) -> Completer:
    """Completers ask the broker or the state dir with a short timeout and never fail loudly."""
    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        try:
            return [CompletionItem(v) for v in fetch(ctx) if v.startswith(incomplete)]
        except Exception:
            return []
    return complete


def _clients(ctx: click.Context) -> KafkaClients:
    from kstool.commands.context import Globals

    g = ctx.find_object(Globals) or Globals()  # with -b/-X/--command-config as typed so far
    g.timeout_s = min(g.timeout_s, 1.5)
    return g.clients()


def complete_from(values: tuple[str, ...]) -> Completer:
    """A completer offering fixed values (e.g. `--window`'s kinds, each followed by what to type)."""
    return _quiet(lambda ctx: values)


@_quiet
def complete_topics(ctx: click.Context) -> list[str]:
    from kstool.kafka.topics import list_topics

    return [t["topic"] for t in list_topics(_clients(ctx))]


@_quiet
def complete_groups(ctx: click.Context) -> list[str]:
    from kstool.kafka.groups import list_groups

    return [g["group"] for g in list_groups(_clients(ctx))]


@_quiet
def complete_apps(ctx: click.Context) -> list[str]:
    from kstool.application.model import default_state_dir
    from kstool.apps.describe import list_apps

    return [a["app_id"] for a in list_apps(default_state_dir())]
