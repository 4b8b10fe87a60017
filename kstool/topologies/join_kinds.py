"""The join kinds, one entry each: which sides are tables, the `--how`s and the options it takes,
its processor (kstool.streams.joins), how its records are spread over tasks, and how
`topology describe` shows it. A `--kind` with `--table-history` (stream-table) or `--foreign-key`
(table-table) is a kind of its own. A new kind is an entry here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, cast

from kstool.base.errors import UsageError
from kstool.streams.joins.foreign_key import SUBSCRIPTIONS, ForeignKeyJoin
from kstool.streams.joins.global_table import GlobalTableJoin
from kstool.streams.joins.joiners import HOWS, Joiner
from kstool.streams.joins.stream_stream import StreamStreamJoin
from kstool.streams.joins.stream_table import StreamTableJoin
from kstool.streams.joins.table_table import TableTableJoin
from kstool.streams.joins.versioned_stream_table import VersionedStreamTableJoin
from kstool.streams.key_mappers import KeyMapper, key_mapper
from kstool.streams.task import LEFT, RIGHT

if TYPE_CHECKING:
    from kstool.topologies.join import Join

FOREIGN_KEY_FORMS = ("field", "split")  # of the left row's value
GLOBAL_KEY_FORMS = ("key", "field", "split")  # of the stream record

# where a kind's records go: to the task of their input partition (or of their key, with
# --repartition); the table's records to every task; through stages of tasks, each by its own
# key (the processor's stages(): kstool.tasks.processor.run_stages)
BY_KEY, TABLE_IN_EVERY_TASK, STAGES = "by key", "table in every task", "stages"

# the options some kinds take, and what a kind that does not take one says
OPTION_REFUSALS = {
    "within": "--within, --before and --after are for stream-stream joins",
    "grace": "--grace is for stream-stream joins and versioned stream-table joins",
    "table_history": "--table-history is for stream-table joins and foreign-key joins",
    "foreign_key": "--foreign-key is for table-table joins",
    "global_key": "--global-key is for stream-global joins",
    "repartition": "",  # every kind but one takes it: that one says why not
}


@dataclass(frozen=True)
class JoinKind:
    kind: str  # its --kind
    tables: tuple[bool, bool]  # left, right: a KTable (else a KStream)
    processor: Callable[[Join, Joiner], Any]
    options: frozenset[str]  # of OPTION_REFUSALS' options, those it takes
    selected_by: str | None = None  # an option that, given, makes --kind this variant of it
    spread: str = BY_KEY
    hows: tuple[str, ...] = HOWS
    how_refusal: str = ""  # what an outer join of a kind without one says
    refusals: dict[str, str] = field(default_factory=dict)  # its own words for an option it does not take
    check: Callable[[Join], Any] = lambda join: None  # what only it checks, raising a UsageError
    check_run: Callable[[Join], None] = lambda join: None  # the same, where a run starts
    spark: Callable[[Join], str] = lambda join: ""  # `topology describe`: its settings in words
    # `topology describe`: Kafka Streams' nodes, given the join's store names
    nodes: Callable[[Join, JoinKind, list[str]], list[dict[str, Any]]] = lambda join, kind, stores: \
        _two_sided_nodes(join, kind, stores)

    def validate(self, join: Join) -> None:
        if join.how not in self.hows:
            raise UsageError(self.how_refusal)
        for option, refusal in OPTION_REFUSALS.items():
            if option not in self.options and _given(join, option):
                raise UsageError(self.refusals.get(option, refusal))
        self.check(join)


def _given(join: Join, option: str) -> bool:
    if option == "within":
        return join.within is not None or join.before is not None or join.after is not None
    return bool(getattr(join, option)) if option in ("grace", "repartition") else getattr(join, option) is not None


def _check_window(join: Join) -> None:
    asymmetric = join.before is not None or join.after is not None
    if join.within is not None and asymmetric:
        raise UsageError("give --within, or --before and --after, not both")
    if asymmetric and (join.before is None or join.after is None):
        raise UsageError("--before and --after go together (0ms for none): how much earlier and how much "
                         "later the right record's timestamp may be than the left one's")
    if join.within is None and not asymmetric:
        raise UsageError("a stream-stream join needs --within DURATION (how far apart the two "
                         "records' timestamps may be), or --before and --after")


def _check_history(join: Join) -> None:
    if join.table_history is not None and join.grace > join.table_history:
        raise UsageError("--table-history must be at least --grace: a record waiting that long must still "
                         "find the table's versions of its time")


def _check_window_holds(join: Join) -> None:
    if sum(join.window()) == 0 and join.grace == 0:
        raise UsageError("a join window of 0 (--within 0, or --before 0 --after 0) needs a --grace of at "
                         "least 1ms: the join stores would hold nothing (retention = before + after + grace)")


def _window_words(join: Join) -> str:
    if join.within is not None:
        return f" within {join.within}ms, grace {join.grace}ms"
    return f" {join.before}ms before to {join.after}ms after, grace {join.grace}ms"


def foreign_key_of(join: Join) -> Callable[[bytes | None], bytes | None]:
    """The right row's key a left row's value names (a usage error for a bad --foreign-key)."""
    mapper = key_mapper(join.foreign_key or "", "--foreign-key", FOREIGN_KEY_FORMS)
    return lambda value: mapper(None, value)


def global_key_of(join: Join) -> KeyMapper:
    """The table key a stream record names (a usage error for a bad --global-key)."""
    return key_mapper(join.global_key or "key", "--global-key", GLOBAL_KEY_FORMS)


def _two_sided_nodes(join: Join, kind: JoinKind, stores: list[str]) -> list[dict[str, Any]]:
    """Kafka Streams' join nodes: a source per side, a join processor per side, their merge."""
    topics = (join.left_topic, join.right_topic)
    joins = [f"{'KTABLE' if table else 'KSTREAM'}-JOIN-{this}" for table, this in zip(kind.tables, ("THIS", "OTHER"))]
    nodes: list[dict[str, Any]] = [
        {"name": f"KSTREAM-SOURCE-000000000{side}", "type": "source", "topics": [topic], "successors": [processor]}
        for side, topic, processor in zip((LEFT, RIGHT), topics, joins)]
    nodes += [{"name": processor, "type": "processor", "stores": stores, "successors": ["KSTREAM-MERGE"]}
              for processor in joins]
    spark = (f"transformWithState per task: {join.kind} {join.how} join{kind.spark(join)}"
             + ("; re-grouped by key" if join.repartition else ""))
    return nodes + [{"name": "KSTREAM-MERGE", "type": "processor", "stores": [], "successors": ["KSTREAM-SINK"],
                     "spark": spark},
                    {"name": "KSTREAM-SINK", "type": "sink", "topic": join.output_topic}]


def _foreign_key_nodes(join: Join, kind: JoinKind, stores: list[str]) -> list[dict[str, Any]]:
    """Kafka Streams' foreign-key join nodes (KTableImpl#doJoinOnForeignKey), in one
    sub-topology; where kstool's three stages of tasks run them in their "spark" notes."""
    registration, subscription = "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION", "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR"
    resolver, output = "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR", "KTABLE-FK-JOIN-OUTPUT"
    foreign = "KTABLE-FK-JOIN-FOREIGN-TABLE-PROCESSOR"
    return [
        {"name": "KTABLE-SOURCE-LEFT", "type": "source", "topics": [join.left_topic], "stores": [stores[0]],
         "successors": [registration]},
        {"name": registration, "type": "processor", "stores": [], "successors": [subscription],
         "spark": f"foreign key: {join.foreign_key} of the left row; stage 1, a task per input partition: the "
                  "subscriptions sent to the foreign key's task inside the query (no subscription topic)"},
        {"name": subscription, "type": "processor", "stores": [SUBSCRIPTIONS, stores[1]], "successors": [resolver],
         "spark": "stage 2, a task per foreign key's partition: each subscription keeps its left row"},
        {"name": "KTABLE-SOURCE-RIGHT", "type": "source", "topics": [join.right_topic], "stores": [stores[1]],
         "successors": [foreign]},
        {"name": foreign, "type": "processor", "stores": [SUBSCRIPTIONS], "successors": [resolver]},
        {"name": resolver, "type": "processor", "stores": [stores[0]], "successors": [output],
         "spark": "stage 3, a task per left key's partition: each left key's last result of the batch (the "
                  "left row came with the subscription)"},
        {"name": output, "type": "processor", "stores": [], "successors": ["KSTREAM-SINK"],
         "spark": f"transformWithState: foreign-key {join.how} join{kind.spark(join)}"},
        {"name": "KSTREAM-SINK", "type": "sink", "topic": join.output_topic},
    ]


_ONE_SIDED = "--how is inner or left for {} joins"

KINDS = (
    JoinKind("stream-stream", (False, False),
             lambda join, joiner: StreamStreamJoin(join.how, *join.window(), join.grace, joiner),
             frozenset({"within", "grace", "repartition"}), check=_check_window, check_run=_check_window_holds,
             spark=_window_words),
    JoinKind("stream-table", (False, True), lambda join, joiner: StreamTableJoin(join.how, joiner),
             frozenset({"table_history", "repartition"}), hows=("inner", "left"),
             how_refusal=_ONE_SIDED.format("stream-table"),
             refusals={"grace": "--grace on a stream-table join needs a versioned table: give --table-history "
                                "DURATION (Kafka Streams: the KTable must be versioned to use a grace period)"}),
    JoinKind("stream-table", (False, True),
             lambda join, joiner: VersionedStreamTableJoin(join.how, cast(int, join.table_history), join.grace, joiner),
             frozenset({"table_history", "grace", "repartition"}), selected_by="table_history", hows=("inner", "left"),
             how_refusal=_ONE_SIDED.format("stream-table"), check=_check_history,
             spark=lambda join: f" against a versioned table (history {join.table_history}ms, grace {join.grace}ms)"),
    JoinKind("table-table", (True, True), lambda join, joiner: TableTableJoin(join.how, joiner, join.cache_max_bytes),
             frozenset({"repartition"})),
    JoinKind("table-table", (True, True),
             lambda join, joiner: ForeignKeyJoin(join.how, foreign_key_of(join), joiner, join.table_history),
             frozenset({"foreign_key", "table_history", "repartition"}), selected_by="foreign_key", spread=STAGES,
             hows=("inner", "left"),
             how_refusal="--how is inner or left for a foreign-key join (Kafka Streams has no outer one)",
             check=foreign_key_of, nodes=_foreign_key_nodes,
             spark=lambda join: f" of versioned tables (history {join.table_history}ms)"
             if join.table_history is not None else ""),
    JoinKind("stream-global", (False, True),
             lambda join, joiner: GlobalTableJoin(join.how, global_key_of(join), joiner),
             frozenset({"global_key"}), spread=TABLE_IN_EVERY_TASK, hows=("inner", "left"),
             how_refusal=_ONE_SIDED.format("stream-global"),
             refusals={"table_history": "--table-history: a global table cannot be versioned (Kafka Streams "
                                        "refuses it too: \"GlobalTables cannot be versioned\")",
                       "repartition": "a stream-global join needs no --repartition: every task holds the whole table"},
             check=global_key_of,
             spark=lambda join: f" on the stream record's {join.global_key or 'key'}, the whole table in every task"),
)
KIND_CHOICES = tuple(dict.fromkeys(kind.kind for kind in KINDS))  # --kind


def kind_of(join: Join) -> JoinKind:
    """The entry of a join's --kind, or of its variant that an option given selects."""
    entries = [kind for kind in KINDS if kind.kind == join.kind]
    if not entries:
        raise UsageError(f"--kind must be one of {', '.join(KIND_CHOICES)}")
    variants = [kind for kind in entries if kind.selected_by is not None and _given(join, kind.selected_by)]
    return (variants or [kind for kind in entries if kind.selected_by is None])[0]

