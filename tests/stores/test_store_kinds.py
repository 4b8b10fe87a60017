"""The store kinds' key layouts as Kafka Streams writes them (the bytes spelled out here from
WindowKeySchema.toStoreKeyBinary and SessionKeySchema.toBinary, not from kstool), and the
changelog configs and restores Kafka Streams gives each kind."""

from __future__ import annotations

from kstool.application.model import StoreSpec
from kstool.stores import KEY_VALUE_STORE, SESSION_STORE, VERSIONED_STORE, WINDOW_STORE
from kstool.stores.windowed_keys import output_key, windowed_key_bounds

START, END = 1_700_000_000_000, 1_700_000_005_000
START_BYTES = bytes.fromhex("0000018bcfe56800")  # 1_700_000_000_000 as a big-endian long
END_BYTES = bytes.fromhex("0000018bcfe57b88")


def test_a_window_store_key_is_the_key_its_start_and_its_seqnum():
    store_key = WINDOW_STORE.key(b"k", START, 3)
    assert store_key == b"k" + START_BYTES + bytes.fromhex("00000003")
    assert WINDOW_STORE.split(store_key) == (b"k", START, 3)
    assert (WINDOW_STORE.record_key(store_key), WINDOW_STORE.start(store_key), WINDOW_STORE.seqnum(store_key)) == \
        (b"k", START, 3)


def test_a_session_store_key_puts_the_end_before_the_start():
    store_key = SESSION_STORE.key(b"k", START, END)
    assert store_key == b"k" + END_BYTES + START_BYTES
    assert SESSION_STORE.split(store_key) == (b"k", START, END)
    assert SESSION_STORE.end(store_key) == END


def test_bytes_of_another_layout_are_no_window_or_session_key():
    assert WINDOW_STORE.bounds(b"short") is None
    assert SESSION_STORE.bounds(b"k" + START_BYTES + END_BYTES) is None  # start after end
    assert windowed_key_bounds("time-windowed", b"k" + START_BYTES) == (b"k", START, None, None)
    assert windowed_key_bounds("window", b"k" + START_BYTES + bytes(4)) == (b"k", START, None, 0)


def test_output_keys_are_kafka_streams_windowed_serializers_or_json():
    assert output_key(b"k", START, END, False, "string") == b"k" + START_BYTES
    assert output_key(b"k", START, END, True, "string") == b"k" + END_BYTES + START_BYTES
    assert output_key(b"k", START, END, True, "json") == b'{"key":"k","start":%d,"end":%d}' % (START, END)


def test_changelogs_are_configured_as_kafka_streams_configures_each_kind():
    day = 86_400_000
    assert KEY_VALUE_STORE.changelog_configs(None, None) == {"cleanup.policy": "compact"}
    assert WINDOW_STORE.changelog_configs(60_000, None) == {"cleanup.policy": "compact,delete",
                                                            "retention.ms": str(60_000 + day)}
    assert SESSION_STORE.changelog_configs(None, None) == {"cleanup.policy": "compact,delete"}
    assert VERSIONED_STORE.changelog_configs(None, 5_000) == {"cleanup.policy": "compact",
                                                              "min.compaction.lag.ms": str(5_000 + day)}


def test_a_store_spec_names_its_kind_and_a_history_makes_it_versioned():
    def spec(kind: str, history_ms: int | None = None) -> StoreSpec:
        return StoreSpec("s", kind, "app-s-changelog", "string", "long", history_ms=history_ms)

    assert spec("key-value").store_kind is KEY_VALUE_STORE
    assert spec("key-value", 5_000).store_kind is VERSIONED_STORE
    assert spec("window").store_kind is WINDOW_STORE and spec("session").store_kind is SESSION_STORE
    assert [k.restore_reads_history for k in (KEY_VALUE_STORE, VERSIONED_STORE, WINDOW_STORE, SESSION_STORE)] == \
        [False, True, False, False]
