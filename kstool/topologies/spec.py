"""How a topology presents itself: its settings (which become the `kstool run NAME` options,
the manifest's parameters and the `topology describe` options) and how it is built from them
or from an app's manifest. kstool.commands renders these as click options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from kstool.contract import Topology

if TYPE_CHECKING:
    from kstool.application.model import Manifest

TOPIC, TEXT, DURATION, FLAG = "topic", "text", "duration", "flag"


@dataclass(frozen=True)
class Setting:
    """One setting of a topology; `name` is the keyword its constructor takes."""

    name: str
    flag: str
    help: str = ""
    default: Any = None
    choices: tuple[str, ...] | None = None
    kind: str = TEXT  # TOPIC | TEXT | DURATION (given as text, passed on in ms) | FLAG
    required: bool = False
    metavar: str | None = None
    # for `topology describe`: offered there (with this help), and a stand-in when not given
    describe_help: str | None = None
    describe_default: Any = None
    suggestions: tuple[str, ...] = ()  # what shell completion offers (the user types the rest)


@dataclass(frozen=True)
class TopologyType:
    name: str
    help: str  # the first line of `kstool run NAME --help`
    settings: tuple[Setting, ...]
    create: Callable[..., Topology]  # keyword arguments: the settings, durations in ms
    # the keyword arguments a manifest's topics give (the rest are its parameters)
    topics_of: Callable[[Manifest], dict[str, str]] = field(
        default=lambda m: {"input_topic": m.input_topics[0], "output_topic": m.output_topics[0]})
    # `topology describe NAME --input A --output B`: the keyword arguments A and B give
    describe_topics: Callable[[str, str], dict[str, str]] = field(
        default=lambda input_topic, output_topic: {"input_topic": input_topic, "output_topic": output_topic})
    # describe stand-ins that depend on other settings (e.g. a stream-stream join's --within)
    describe_extra: Callable[[dict[str, Any]], dict[str, Any]] = field(default=lambda values: {})
    examples: tuple[str, ...] = ()  # they end `kstool run NAME --help` and its man page (three at most)
    # `topology describe NAME` arguments giving each processor graph it builds (the tests draw each)
    shapes: tuple[tuple[str, ...], ...] = ((),)

    def from_manifest(self, manifest: Manifest) -> Topology:
        return self.create(**self.topics_of(manifest), **manifest.parameters)

    def for_describe(self, input_topic: str, output_topic: str, given: dict[str, Any]) -> Topology:
        """The topology `topology describe NAME` shows: the settings given, stand-ins else."""
        values = {s.name: s.describe_default for s in self.settings if s.describe_default is not None}
        values.update({k: v for k, v in given.items() if v is not None and k in self.setting_names()})
        values.update(self.describe_extra(values))
        return self.create(**self.describe_topics(input_topic, output_topic), **values)

    def setting_names(self) -> set[str]:
        return {s.name for s in self.settings}
