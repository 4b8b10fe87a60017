"""Kafka Streams' joins, a file per kind: `stream_stream.py` (KStreamKStreamJoin; its batch path
`stream_stream_batches.py`), `stream_table.py` (KStreamKTableJoin), `versioned_stream_table.py`
(against a versioned table, with grace), `table_table.py` (KTableKTableJoin), `foreign_key.py`
(KIP-213), `global_table.py` (KStreamGlobalKTableJoin); `joiners.py` what every kind shares: the
kinds, `--how`, and the joined value. Records with a null key are dropped (but where a left join
keeps one, KIP-962), and so are stream records with a null value; on a table side a null value
deletes the key."""
