"""The stores of Kafka Streams' own apps (tests/reference_apps.py), rebuilt by kstool from their
changelog topics, hold what the apps' Interactive Queries return."""

from __future__ import annotations

import json
import uuid

from tests.conftest import cli
from tests.helpers import as_long, counts_in, create_topic, jsonl_rows, produce_batched, produce_values, read_all, wait_until
from tests.oracles import word_counts
from tests.reference_apps import ReferenceApp

LINES = ["the cat sat", "The dog sat on the cat", "a cat a dog", "sat sat sat"]


def test_a_timestamped_key_value_store_is_what_interactive_queries_return(apache_kafka, tmp_path):
    source, app_id = (f"ref-{name}-{uuid.uuid4().hex[:6]}" for name in ("lines", "wordcount"))
    create_topic(apache_kafka, source, 2)
    produce_values(apache_kafka, source, [line.encode() for line in LINES])
    with ReferenceApp("wordcount", apache_kafka.bootstrap, app_id, "classic", tmp_path / app_id, source,
                      app_id + "-out") as app:
        wait_until(lambda: counts_in(apache_kafka, app_id + "-out") == word_counts(LINES), "the app's counts")
        queried = app.query("counts")
    assert queried == dict(word_counts(LINES))
    got = cli("-b", apache_kafka.bootstrap, "state", "all", "--changelog-topic", f"{app_id}-counts-changelog",
              "--key-format", "string", "--value-format", "long", "-o", "json")
    assert got.exit_code == 0, got.stderr
    assert {row["key"]: row["value"] for row in json.loads(got.stdout)} == queried


BASE = 1_767_225_600_000
# (key, seconds after BASE); a on partition 0, b on 1: each partition's store has its own stream time
EVENTS = [("a", 0), ("a", 10), ("b", 20), ("a", 45), ("b", 70), ("a", 75), ("a", 200), ("b", 300)]
# the reference app's "windows": store, key format, window size (IQ's window end = start + size)
WINDOW_STORES = [("tumbling", "windowed:string", "1m"), ("hopping", "windowed:string", "1m"),
                 ("sliding", "windowed:string", "30s"), ("sessions", "session:string", None)]


def test_window_and_session_stores_are_what_interactive_queries_return(apache_kafka, tmp_path):
    source, app_id = (f"ref-{name}-{uuid.uuid4().hex[:6]}" for name in ("events", "windows"))
    create_topic(apache_kafka, source, 2)
    create_topic(apache_kafka, app_id + "-final", 1)
    produce_batched(apache_kafka, source, [(key.encode(), b"x", 0 if key == "a" else 1, BASE + s * 1000)
                                           for key, s in EVENTS])
    with ReferenceApp("windows", apache_kafka.bootstrap, app_id, "classic", tmp_path / app_id, source,
                      app_id + "-final") as app:
        wait_until(lambda: sum(s["value"] for s in app.query("sessions", "session")) == len(EVENTS),
                   lambda: f"every event in a session: {app.query('sessions', 'session')}")
        queried = {store: app.query(store, "session" if store == "sessions" else "window")
                   for store, *_ in WINDOW_STORES}
        described = tmp_path / "topology.txt"
        described.write_text(app.topology)

    # its describe() text, read back: the same text, and each store's changelog is a topic the app wrote
    assert cli("topology", "describe", "--from-file", str(described), "-o", "text").stdout.rstrip() == app.topology.rstrip()
    drawn = json.loads(cli("topology", "describe", "--from-file", str(described), "--app-id", app_id, "-o", "json").stdout)
    listed = json.loads(cli("-b", apache_kafka.bootstrap, "changelog", "list", "--app-id", app_id, "-o", "json").stdout)
    assert sorted(s["changelog_topic"] for s in drawn["stores"]) == sorted(t["topic"] for t in listed) == sorted(
        f"{app_id}-{store}-changelog" for store in ("tumbling", "hopping", "sliding", "sessions", "final-store"))

    def state(store, key_format, *args):
        got = cli("-b", apache_kafka.bootstrap, "state", *args, "--changelog-topic", f"{app_id}-{store}-changelog",
                  "--key-format", key_format, "--value-format", "long", "-o", "json")
        if got.exit_code == 1 and "not found" in got.stderr:
            return []
        assert got.exit_code == 0, got.stderr
        return sorted((r["key"], r["window_start"], r["window_end"], r["value"]) for r in json.loads(got.stdout))

    for store, key_format, size in WINDOW_STORES:
        sized = ["--window-size", size] if size else []
        expected = sorted((w["key"], w["start"], w["end"], w["value"]) for w in queried[store])
        assert state(store, key_format, "all", *sized) == expected, store
        # fetch(key, from, to): windows starting in it; sessions ending at or after from and
        # starting at or before to (ReadOnlySessionStore.findSessions(key, earliestEnd, latestStart))
        first_minute = [w for w in expected if w[0] == "a" and (
            BASE <= w[1] <= BASE + 60_000 if store != "sessions" else w[2] >= BASE and w[1] <= BASE + 60_000)]
        assert state(store, key_format, "fetch", "a", "--from", f"@{BASE}", "--to", f"@{BASE + 60_000}",
                     *sized) == first_minute, store

    # the tumbling store keeps 1m + 30s grace: its changelog still holds windows that the store
    # (and so Interactive Queries) no longer returns, per partition: a's at 3m, b's at 5m only
    assert sorted((w["key"], w["start"]) for w in queried["tumbling"]) == [("a", BASE + 180_000), ("b", BASE + 300_000)]
    logged = cli("-b", apache_kafka.bootstrap, "changelog", "dump", f"{app_id}-tumbling-changelog", "--compact",
                 "--key-format", "windowed:string", "--value-format", "long", "-o", "jsonl")
    assert len(jsonl_rows(logged.stdout)) == 6
    # a fetch of those says where they are, not only "no window" (#84): a's at 0 and 1m
    gone = cli("-b", apache_kafka.bootstrap, "state", "fetch", "a", "--to", f"@{BASE + 60_000}", "--changelog-topic",
               f"{app_id}-tumbling-changelog", "--key-format", "windowed:string", "--value-format", "long")
    assert gone.exit_code == 1
    assert gone.stderr.strip() == (
        f"kstool: error: not found: no window of 'a' in that range (1 outside it); its changelog "
        f"{app_id}-tumbling-changelog still holds 2 older window(s) of it, past the store's retention (1m30s), "
        "which Kafka Streams no longer returns: a longer --retention reads them")
    longer = cli("-b", apache_kafka.bootstrap, "state", "fetch", "a", "--to", f"@{BASE + 60_000}", "--retention", "1d",
                 "--changelog-topic", f"{app_id}-tumbling-changelog", "--key-format", "windowed:string",
                 "--value-format", "long", "-o", "json")
    assert [w["window_start"] for w in json.loads(longer.stdout)] == [BASE, BASE + 60_000], longer.stderr

    # what suppress(untilWindowCloses) emitted, once each: the closed windows (a's by 200s, b's by
    # 300s, end + 30s grace) with their last count in the store's changelog
    wait_until(lambda: len(read_all(apache_kafka, app_id + "-final")) >= 4, "four windows closed")
    final = {m.key().decode(): as_long(m.value()) for m in read_all(apache_kafka, app_id + "-final")}
    last = {f"{r['key']}@{r['window_start']}": r["value"] for r in jsonl_rows(logged.stdout)}
    assert final == {key: last[key] for key in (f"a@{BASE}", f"a@{BASE + 60_000}", f"b@{BASE}", f"b@{BASE + 60_000}")}


def test_a_suppression_buffer_changelog_is_decoded_not_shown_as_bytes(apache_kafka, tmp_path):
    source, app_id = (f"ref-{name}-{uuid.uuid4().hex[:6]}" for name in ("events", "suppress"))
    create_topic(apache_kafka, source, 1)
    create_topic(apache_kafka, app_id + "-final", 1)
    # stream time 95s closes a@0 (its end 60s + grace 30s); the buffer still holds a@1m and b@1m
    produce_batched(apache_kafka, source, [(b"a", b"x", 0, BASE), (b"b", b"x", 0, BASE + 61_000),
                                           (b"a", b"x", 0, BASE + 62_000), (b"b", b"x", 0, BASE + 95_000)])
    topic = f"{app_id}-final-store-changelog"

    def held() -> dict:
        dumped = cli("-b", apache_kafka.bootstrap, "changelog", "dump", topic, "--detect", "--compact", "-o", "jsonl")
        assert dumped.exit_code == 0 and "did not decode" not in dumped.stderr, dumped.stderr
        return {(_shown(r["key"]), r.get("window_start")): r["value"] for r in jsonl_rows(dumped.stdout)}

    def counts() -> dict:
        """Each held window's count; anything else as its JSON (a failed wait then shows it: a
        crash here was seen once under load, not reproduced)."""
        return {key: value["value"] if isinstance(value, dict) and "value" in value else _shown(value)
                for key, value in held().items()}

    with ReferenceApp("windows", apache_kafka.bootstrap, app_id, "classic", tmp_path / app_id, source,
                      app_id + "-final"):
        # the buffer logs at each commit: a@0 left it (a tombstone), a@1m and b@1m wait
        wait_until(lambda: counts() == {("a", BASE + 60_000): 1, ("b", BASE + 60_000): 2},
                   lambda: f"the buffer's changelog: {held()}")
    assert [m.key() for m in read_all(apache_kafka, app_id + "-final")] == [f"a@{BASE}".encode()]
    described = cli("-b", apache_kafka.bootstrap, "changelog", "describe", topic, "--detect", "-o", "json")
    layout = json.loads(described.stdout)["layout"]
    assert (layout["formats"]["key"], layout["formats"]["value"]) == ("time-windowed:string", "suppress-buffer:long")
    for (_, start), buffered in held().items():
        assert buffered["buffer_time"] == start + 60_000, "it leaves the buffer when its window ends"
        assert (buffered["record"]["topic"], buffered["record"]["partition"]) == (source, 0)


def _shown(value):
    return value if isinstance(value, (str, int)) or value is None else json.dumps(value, sort_keys=True)


def test_versioned_global_and_foreign_key_join_stores_are_what_the_app_holds(apache_kafka, tmp_path):
    source, app_id = (f"ref-{name}-{uuid.uuid4().hex[:6]}" for name in ("orders", "joins"))
    output = app_id + "-out"
    for topic, partitions in ((source, 2), (source + "-prices", 2), (source + "-regions", 1),
                              (source + "-customers", 1), (source + "-accounts", 1),
                              (output, 1), (output + "-global", 1), (output + "-fk", 1)):
        create_topic(apache_kafka, topic, partitions)
    # p1's price 11 arrives after 12 but is older: the versioned table's latest stays 12
    produce_batched(apache_kafka, source + "-prices", [(b"p1", b"10", 0, BASE + 100), (b"p1", b"12", 0, BASE + 300),
                                                       (b"p1", b"11", 0, BASE + 200), (b"p2", b"5", 1, BASE + 100)])
    produce_batched(apache_kafka, source + "-regions", [(b"p1", b"eu"), (b"p2", b"us")])
    # one partition each: a foreign-key join needs the right table partitioned as Kafka's murmur2 would
    produce_batched(apache_kafka, source + "-customers", [(b"c1", b"alice"), (b"c2", b"bob")])
    accounts = {"a1": "c1|gold", "a2": "c2|silver", "a3": "c1|basic"}
    produce_batched(apache_kafka, source + "-accounts", [(k.encode(), v.encode()) for k, v in accounts.items()])
    with ReferenceApp("joins", apache_kafka.bootstrap, app_id, "classic", tmp_path / app_id, source, output) as app:
        produce_batched(apache_kafka, source, [(b"p1", b"2", 0, BASE + 250), (b"p2", b"1", 1, BASE + 150)])
        wait_until(lambda: [len(read_all(apache_kafka, t)) for t in (output, output + "-global", output + "-fk")]
                   == [2, 2, 3], "every join's output")
        queried = {"prices": app.query("prices", "versioned", ["p1", "p2"]), "regions": app.query("regions"),
                   "customers": app.query("customers"), "accounts": app.query("accounts")}

    def state_all(topic: str) -> dict:
        got = cli("-b", apache_kafka.bootstrap, "state", "all", "--changelog-topic", topic, "-o", "json")
        assert got.exit_code == 0, got.stderr
        return {row["key"]: row["value"] for row in json.loads(got.stdout)}

    assert queried["prices"] == {"p1": {"value": "12", "timestamp": BASE + 300}, "p2": {"value": "5", "timestamp": BASE + 100}}
    # a versioned store's changelog is its history; kstool takes each key's latest version by time
    assert state_all(f"{app_id}-prices-changelog") == {"p1": "12", "p2": "5"}
    assert state_all(source + "-regions") == queried["regions"]  # a global store's changelog is its topic
    assert state_all(f"{app_id}-customers-changelog") == queried["customers"] == {"c1": "alice", "c2": "bob"}
    assert state_all(f"{app_id}-accounts-changelog") == queried["accounts"] == accounts

    # the foreign-key join's subscription store: which account subscribes to which customer
    [subscriptions] = [t["topic"] for t in json.loads(cli("-b", apache_kafka.bootstrap, "changelog", "list", "--app-id",
                                                          app_id, "-o", "json").stdout)
                       if "SUBSCRIPTION-STATE-STORE" in t["topic"]]
    dumped = cli("-b", apache_kafka.bootstrap, "changelog", "dump", subscriptions, "--detect", "-o", "jsonl")
    assert dumped.exit_code == 0 and "did not decode" not in dumped.stderr, dumped.stderr
    rows = jsonl_rows(dumped.stdout)
    assert sorted((r["key"]["foreign_key"], r["key"]["primary_key"]) for r in rows) == sorted(
        (value.split("|")[0], key) for key, value in accounts.items())
    # an inner join's subscription: answer only when the customer exists (SubscriptionWrapper.Instruction)
    assert all(r["value"]["primary_key"] == r["key"]["primary_key"] and r["value"]["primary_partition"] == 0
               and r["value"]["instruction"] == "PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE" for r in rows), rows
