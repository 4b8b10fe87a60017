"""list / describe / dump of changelog topics. Reads with the shared consumer; decodes with
the Kafka Streams layouts; never fails on undecodable bytes (they are shown as hex)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, cast

from kstool.application.model import app_ids, iter_apps
from kstool.base.errors import NotFoundError, UsageError
from kstool.base.names import did_you_mean
from kstool.base.serdes import as_text
from kstool.changelog import fk_subscription, suppress_buffer
from kstool.changelog.layouts import (
    KeySpec,
    detect_key_format,
    detect_layout,
    detect_value_format,
    key_decoder,
    value_decoder,
)
from kstool.kafka.client import KafkaClients
from kstool.kafka.compaction import kept_by_compaction
from kstool.kafka.consume import ConsumeOptions, StartSpec, consume
from kstool.kafka.groups import list_groups
from kstool.kafka.topics import topics_configs
from kstool.schemas.formats import SchemaOptions, Schemas, schemas_for

SUFFIX = "-changelog"
DETECT_SAMPLE = 1000


def _manifest_stores(state_dir: Path) -> dict[str, tuple[str, Any]]:
    """changelog topic -> (app id, store spec) for every kstool app in the state dir."""
    return {store.changelog_topic: (manifest.app_id, store)
            for _, manifest in iter_apps(state_dir) for store in manifest.stores}


def _owner(topic: str, known: dict, groups: list[str]) -> tuple[str | None, str]:
    if topic in known:
        return known[topic][0], known[topic][1].name
    owners = sorted((g for g in groups if topic.startswith(f"{g}-")), key=len, reverse=True)
    if owners:
        return owners[0], topic[len(owners[0]) + 1:-len(SUFFIX)]
    return None, topic[:-len(SUFFIX)]


def list_changelogs(clients: KafkaClients, state_dir: Path, app_id: str | None = None) -> list[dict]:
    meta = clients.metadata().topics
    known = _manifest_stores(state_dir)
    groups = [g["group"] for g in list_groups(clients)]
    owned = {}
    owners: set[str | None] = set()
    for topic in sorted(t for t in meta if t.endswith(SUFFIX)):
        app, store = _owner(topic, known, groups)
        owners.add(app)
        if not app_id or app == app_id or topic.startswith(f"{app_id}-"):
            owned[topic] = (app, store)
    apps = owners | set(groups) | set(app_ids(state_dir))
    if app_id and not owned and app_id not in apps:  # a typo, not an app without stores
        raise NotFoundError(f"no application {app_id!r}: no changelog topic, consumer group or kstool app has "
                            "that id" + did_you_mean(app_id, sorted(a for a in apps if a is not None)))
    # one ListOffsets and one DescribeConfigs round trip for all of them, not one per topic
    marks = clients.watermarks([(t, p) for t in owned for p in sorted(meta[t].partitions)])
    configs = topics_configs(clients, list(owned))
    records = dict.fromkeys(owned, 0)
    for (topic, _), (low, high) in marks.items():
        records[topic] += max(high - low, 0)
    return [{"topic": topic, "app_id": app, "store": store, "partitions": len(meta[topic].partitions),
             "records": records[topic],
             "cleanup_policy": configs[topic].get("cleanup.policy"), "kstool_app": topic in known}
            for topic, (app, store) in owned.items()]


@dataclass
class Formats:
    key: KeySpec
    value: str
    source: str  # flags | manifest | detected | default
    evidence: str = ""
    schemas: Schemas | None = None  # for avro keys or values


def resolve_formats(clients: KafkaClients, topic: str, state_dir: Path, key_format: str | None,
                    value_format: str | None, detect: bool, schemas: SchemaOptions | None = None) -> Formats:
    if key_format or value_format:
        return flag_formats(key_format, value_format, schemas)
    known = _manifest_stores(state_dir)
    if topic in known and not detect:
        app_id, store = known[topic]
        return store_formats(store, f"kstool app {app_id!r}, store {store.name!r}")
    # a changelog kstool did not write (a Kafka Streams app's): its bytes tell (8-byte counts...)
    return detect_formats(clients, topic)


def flag_formats(key_format: str | None, value_format: str | None, schemas: SchemaOptions | None) -> Formats:
    """Formats given on the command line (string unless given)."""
    spec, value = KeySpec.parse(key_format or "string"), value_format or "string"
    return Formats(spec, value, "flags", schemas=schemas_for({"key": spec.key_format, "value": value}, schemas or SchemaOptions()))


def store_formats(store, evidence: str = "") -> Formats:
    """A kstool store's changelog formats, from its manifest (its kind is the key layout)."""
    return Formats(KeySpec(store.kind, store.key_format), store.value_format, "manifest", evidence)


def detect_formats(clients: KafkaClients, topic: str) -> Formats:
    sample = []
    for record in consume(clients, ConsumeOptions(topic, exit_at_end=True, max_messages=DETECT_SAMPLE)):
        sample.append(record)
    keys, values = [r.key for r in sample], [r.value for r in sample]
    if fk_subscription.TOPIC.fullmatch(topic):
        primary_keys: list[bytes | None] = [fk_subscription.split_key(k)[1] for k in keys if k is not None and _splits(k)]
        inner = detect_value_format(primary_keys)
        return Formats(KeySpec("key-value", f"{fk_subscription.FORMAT_PREFIX}:{inner}"),
                       f"{fk_subscription.FORMAT_PREFIX}:{inner}", "detected",
                       "named as a foreign-key join's subscription store: CombinedKey keys, SubscriptionWrapper values")
    layout, evidence = detect_layout(keys)
    value_format = detect_value_format(values)
    if suppress_buffer.is_buffer([r.headers for r in sample if r.value is not None]):
        value_format = f"{suppress_buffer.FORMAT_PREFIX}:{detect_value_format(suppress_buffer.new_values(values))}"
        evidence += "; values carry the header v=3 of Kafka Streams' suppression buffer"
    return Formats(KeySpec(layout, detect_key_format(keys, layout)), value_format, "detected",
                   f"{evidence}; from {len(sample)} records")


def _splits(key: bytes) -> bool:
    try:
        fk_subscription.split_key(key)
        return True
    except ValueError:
        return False


@dataclass
class DumpOptions:
    topic: str
    formats: Formats
    compact: bool = False
    show_tombstones: bool = False
    key: str | None = None
    key_prefix: str | None = None
    start: StartSpec = field(default_factory=lambda: StartSpec("beginning"))
    from_time: int | None = None
    to_offset: int | None = None
    to_time: int | None = None
    follow: bool = False
    partitions: list[int] | None = None


@dataclass
class DecodeStats:
    bad_keys: int = 0
    bad_values: int = 0


def dump(clients: KafkaClients, options: DumpOptions, stats: DecodeStats) -> Iterator[dict]:
    if options.compact and options.follow:
        raise UsageError("--compact shows a finished view; it cannot be combined with --follow")
    formats = options.formats
    decode_key, decode_value = key_decoder(formats.key, formats.schemas), value_decoder(formats.value, formats.schemas)
    consume_options = ConsumeOptions(options.topic, start=options.start, from_time=options.from_time,
                                     to_time=options.to_time, partitions=options.partitions,
                                     exit_at_end=not options.follow)
    rows = (_row(r, decode_key, decode_value, stats) for r in consume(clients, consume_options)
            if options.to_offset is None or (r.offset or 0) <= options.to_offset)
    rows = (r for r in rows if _matches(r, options))
    if not options.compact:
        yield from rows
        return
    read = list(rows)
    kept = [read[i] for i in kept_by_compaction([(r["partition"], r.pop("_raw_key")) for r in read])]
    for row in sorted(kept, key=lambda r: (r["partition"], r["offset"])):
        if options.show_tombstones or not row["tombstone"]:
            yield row


def _row(record, decode_key, decode_value, stats: DecodeStats) -> dict:
    key = decode_key(record.key)
    value, value_ok = decode_value(record.value)
    if not key.ok:
        stats.bad_keys += 1
    if not value_ok:
        stats.bad_values += 1
    return {
        "partition": record.partition, "offset": record.offset, "timestamp": record.timestamp,
        "key": key.key if key.ok else {"hex": record.key.hex()},
        "window_start": key.window_start, "window_end": key.window_end, "seqnum": key.seqnum,
        "value": value if value_ok else {"hex": record.value.hex()},
        "tombstone": record.value is None, "_raw_key": record.key,
    }


def _matches(row: dict, options: DumpOptions) -> bool:
    if options.key is None and options.key_prefix is None:
        return True
    text = as_text(row["key"])
    if options.key is not None:
        return text == options.key
    return text.startswith(options.key_prefix or "")


def public(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith("_")}


def describe(clients: KafkaClients, topic: str, formats: Formats) -> dict:
    partitions = clients.topic_partitions(topic)
    marks = clients.watermarks([(topic, p) for p in partitions])
    stats: dict[int, dict[str, Any]] = {p: {"partition": p, "low_offset": marks[(topic, p)][0], "high_offset": marks[(topic, p)][1],
                 "records": 0, "distinct_keys": 0, "tombstones": 0, "oldest_timestamp": None,
                 "newest_timestamp": None} for p in partitions}
    keys: dict[int, set[bytes | None]] = {p: set() for p in partitions}
    sample_keys: list[bytes | None] = []
    for record in consume(clients, ConsumeOptions(topic, exit_at_end=True)):
        partition = cast(int, record.partition)  # read from a topic
        s = stats[partition]
        s["records"] += 1
        s["tombstones"] += record.value is None
        keys[partition].add(record.key)
        if len(sample_keys) < DETECT_SAMPLE:
            sample_keys.append(record.key)
        ts = record.timestamp
        if ts is not None:
            s["oldest_timestamp"] = ts if s["oldest_timestamp"] is None else min(s["oldest_timestamp"], ts)
            s["newest_timestamp"] = ts if s["newest_timestamp"] is None else max(s["newest_timestamp"], ts)
    for p, s in stats.items():
        s["distinct_keys"] = len(keys[p])
        s["records_per_key"] = round(s["records"] / s["distinct_keys"], 3) if s["distinct_keys"] else None
    rows = [stats[p] for p in partitions]
    layout, evidence = detect_layout(sample_keys)
    total_records = sum(r["records"] for r in rows)
    total_keys = sum(r["distinct_keys"] for r in rows)
    stamps = [r[k] for r in rows for k in ("oldest_timestamp", "newest_timestamp") if r[k] is not None]
    return {
        "topic": topic,
        "partitions": rows,
        "total": {"records": total_records, "distinct_keys": total_keys,
                  "tombstones": sum(r["tombstones"] for r in rows),
                  "records_per_key": round(total_records / total_keys, 3) if total_keys else None,
                  "reclaimable_records": total_records - total_keys,
                  "oldest_timestamp": min(stamps) if stamps else None,
                  "newest_timestamp": max(stamps) if stamps else None},
        "layout": {"detected": layout, "evidence": evidence,
                   "formats": {"key": f"{formats.key.layout}:{formats.key.key_format}",
                               "value": formats.value, "source": formats.source,
                               "evidence": formats.evidence}},
    }
