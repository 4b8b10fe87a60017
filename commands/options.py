"""Click decorators and parameter types shared by several commands."""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar, cast

import click

from kstool.application.model import resolve_state_dir
from kstool.base.errors import KstoolError, UsageError
from kstool.base.serdes import FORMATS as SERDE_FORMATS, RECORD_FORMATS, SCHEMA_FORMATS
from kstool.base.timeutil import parse_duration, parse_time
from kstool.changelog.fk_subscription import FORMAT_PREFIX as SUBSCRIPTION
from kstool.changelog.suppress_buffer import FORMAT_PREFIX as SUPPRESS_BUFFER
from kstool.commands.completion import complete_from, complete_topics
from kstool.output import FORMATS
from kstool.schemas.formats import SchemaOptions
from kstool.schemas.windowed import LAYOUTS as WINDOWED_LAYOUTS

if TYPE_CHECKING:
    from kstool.topologies.spec import Setting

# a command function, which the decorators here return with its options attached
F = TypeVar("F", bound=Callable[..., Any])


def gathered(into: str, cls: type[Any], *decorators: Callable[[Any], Any]) -> Callable[[F], F]:
    """Click options whose values reach the command as one typed object: keyword `into`,
    cls(**values), cls a dataclass whose fields are the options' names."""
    names = [f.name for f in dataclasses.fields(cls)]

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            kwargs[into] = cls(**{name: kwargs.pop(name) for name in names if name in kwargs})
            return func(*args, **kwargs)
        return cast(F, functools.reduce(lambda f, d: d(f), reversed(decorators), wrapper))
    return decorate


class OutputFormat(click.Choice[str]):
    """-o's formats; an offset there (kcat's -o) gets a hint to --from."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            if isinstance(value, str) and (value.lstrip("-").isdigit() or value in ("beginning", "end")):
                self.fail(f"{value!r} is not an output format ({', '.join(self.choices)}); -o is the output "
                          f"format here, not kcat's offset: give the start as --from {value}", param, ctx)
            raise


def output_option(default: str | None = "table", extra: tuple[str, ...] = (), long: str = "--output",
                  dest: str = "output",
                  help_text: str = "Output format; json is one stable document, jsonl one object per line.",
                  ) -> Callable[[F], F]:
    """-o: every command that shows data takes kstool.output's FORMATS (and maybe its own)."""
    return click.option("-o", long, dest, type=OutputFormat([*extra, *FORMATS]), default=default,
                        show_default=default is not None, help=help_text)


def named_argument(name: str, flag_help: str, **argument: Any) -> Callable[[F], F]:
    """A command's NAME argument that also takes Kafka's tools' spelling, --NAME VALUE
    (`kafka-topics.sh --describe --topic t`, `kafka-consumer-groups.sh --describe --group g`)."""
    flag = f"{name}_flag"

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given, spelled = kwargs.get(name), kwargs.pop(flag)
            if given is not None and spelled is not None and given != spelled:
                raise UsageError(f"give the {name} once: {given!r} or --{name} {spelled!r}")
            if given is None and spelled is None:
                raise UsageError(f"missing {name.upper()} (or --{name} {name.upper()})")
            kwargs[name] = given if given is not None else spelled
            return func(*args, **kwargs)
        flagged = click.option(f"--{name}", flag, metavar=name.upper(), help=flag_help,
                               shell_complete=argument.get("shell_complete"))(wrapper)
        return cast(F, click.argument(name, required=False, **argument)(flagged))
    return decorate


class StoreValueFormat(click.Choice[str]):
    """A store's value format, or Kafka Streams' wrapper around one: suppress-buffer:FMT (a
    suppression buffer), subscription:FMT (a foreign-key join's subscription store)."""

    def __init__(self) -> None:
        plain = [*SERDE_FORMATS, *SCHEMA_FORMATS]
        super().__init__(plain + [f"{wrapper}:{f}" for wrapper in (SUPPRESS_BUFFER, SUBSCRIPTION) for f in plain])

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str:
        return "FMT|suppress-buffer:FMT|subscription:FMT"


# what a store's keys and values (changelogs, state) and whole records (also `raw`) may be in
STORE_FORMATS = StoreValueFormat()


class KeyFormat(click.Choice[str]):
    """A key's format, or Kafka Streams' windowed key around one: windowed:FMT, session:FMT."""

    def __init__(self) -> None:
        plain = [*RECORD_FORMATS, *SCHEMA_FORMATS]
        inner = [f for f in plain if f != "raw"]
        super().__init__(plain + [f"{layout}:{f}" for layout in WINDOWED_LAYOUTS for f in inner])

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str:
        return "FMT|windowed:FMT|session:FMT"


def record_format_option(part: str, help_text: str) -> Callable[[F], F]:
    """--key-format / --value-format of the commands that read or write records."""
    kind = KeyFormat() if part == "key" else click.Choice([*RECORD_FORMATS, *SCHEMA_FORMATS])
    return click.option(f"--{part}-format", type=kind, default="string", show_default=True, help=help_text)


def state_dir_option(help_text: str = "Where kstool apps live [default: $KSTOOL_HOME/apps].") -> Callable[[F], F]:
    """--state-dir, handed to the command as a resolved Path."""
    return click.option("--state-dir", type=click.Path(file_okay=False), help=help_text, callback=_resolved_state_dir)


def _resolved_state_dir(ctx: click.Context, param: click.Parameter, value: str | None) -> Path:
    return resolve_state_dir(value)


def yes_option(what: str) -> Callable[[F], F]:
    return click.option("--yes", "-y", is_flag=True, help=f"Do not ask before {what}.")


def confirm_or_refuse(question: str, yes: bool) -> None:
    """A destructive step goes ahead with --yes, or after a yes on a terminal; off a terminal
    (cron, pipes) without --yes it is refused before anything is done."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError("not on a terminal: add --yes to confirm (or --dry-run to see the plan)")
    if not click.confirm(question, err=True):
        raise KstoolError("not confirmed: nothing was changed")


class ParsedType(click.ParamType[int]):
    """A value every command parses alike, in milliseconds; a bad one is click's usage error."""

    def __init__(self, name: str, parse: Callable[[str], int]):
        self.name, self.parse = name, parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return self.parse(value)
        except UsageError as exc:
            self.fail(str(exc), param, ctx)


# a time: ISO-8601, epoch ms (or @ms), or a duration ago; a duration: 90s, 1h30m, PT5M
TIME = ParsedType("time", parse_time)
DURATION = ParsedType("duration", parse_duration)


def setting_option(setting: Setting, for_describe: bool = False) -> Callable[[F], F]:
    """A topology setting as a click option (`run NAME`, or `topology describe`)."""
    from kstool.topologies.spec import FLAG, TOPIC  # here: importing them loads every topology

    help_text = (setting.describe_help if for_describe else setting.help) or None
    if setting.kind == FLAG:
        return click.option(setting.flag, setting.name, is_flag=True, help=help_text)
    default = None if for_describe and not setting.choices else setting.default
    return click.option(
        setting.flag, setting.name, required=setting.required and not for_describe,
        type=click.Choice(setting.choices) if setting.choices else None,
        # click 8.3+ takes an explicit default=None as a value given: a required option would pass unset
        **({} if default is None else {"default": default}),
        show_default=setting.default is not None and setting.default is not False,
        metavar=setting.metavar, help=help_text,
        shell_complete=complete_topics if setting.kind == TOPIC else
        complete_from(setting.suggestions) if setting.suggestions else None)


@dataclasses.dataclass(frozen=True)
class SchemaFlags:
    schema_registry: str | None = None
    key_schema: str | None = None
    value_schema: str | None = None
    no_header: bool = False
    register_schemas: bool = False

    def options(self, configured: dict[str, str]) -> SchemaOptions:
        """configured: the registry settings from --command-config / -X (ClientConfig)."""
        registry = {**configured, **({"url": self.schema_registry} if self.schema_registry else {})}
        return SchemaOptions(registry, self.key_schema, self.value_schema, not self.no_header,
                             self.register_schemas)


def schema_options(writes: bool = False) -> Callable[[F], F]:
    """--schema-registry, --key-schema, --value-schema, --no-header (and --register-schemas for
    commands that write), for the formats that need a schema (avro, protobuf, jsonschema)."""
    flags = [
        click.option("--schema-registry", metavar="URL",
                     help="Schema Registry for keys and values with schemas (else schema.registry.url "
                          "from --command-config)."),
        click.option("--key-schema", type=click.Path(dir_okay=False), metavar="FILE",
                     help="The keys' schema from a file (.avsc, .proto, .json) instead of the registry."),
        click.option("--value-schema", type=click.Path(dir_okay=False), metavar="FILE",
                     help="The values' schema from a file (.avsc, .proto, .json) instead of the registry."),
        click.option("--no-header", is_flag=True,
                     help="Schema payloads are bare: no wire-format header (magic byte, schema id)."),
    ]
    if writes:
        flags.append(click.option("--register-schemas", is_flag=True,
                                  help="Register --key-schema/--value-schema under TOPIC-key/TOPIC-value "
                                       "if new (default: look the id up)."))
    return gathered("schema_flags", SchemaFlags, *flags)
