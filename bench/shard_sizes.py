"""What a batch costs a task's sharded store by how many keys it changes, per shard size:
`python -m bench.shard_sizes [--entries 1000000] [--sizes 4096,1024,512,256]` (not CI).

One Python process, no Spark: a `ShardedStore` over a dict standing in for Spark's state (so
the state calls' own 30-70 µs each are not in the figures), a store of `--entries` entries;
each batch changes that many random keys: the shards read, the changes, the write-back. Best of
two. Results: bench/results/shard-sizes-<time>.json; findings in bench/notes/source-combiner.md ("What shards cost")."""

from __future__ import annotations

import argparse
import gc
import json
import random
import time
from pathlib import Path

import kstool.tasks.shards as shards
from bench.runs import machine
from kstool.streams.task import StoreValue

BATCHES = (10, 100, 1000, 5000, 100_000, 500_000)


class DictState:
    """The state calls ShardedStore makes, over a dict of shard id -> (blob,)."""

    def __init__(self):
        self.data: dict[bytes, tuple] = {}

    def get_many(self, keys: list[bytes]) -> dict[bytes, tuple | None]:
        return {key: self.data.get(key) for key in keys}

    def write_many(self, changes) -> None:
        for key, value in changes:
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value


def _key(i: int) -> bytes:
    return b"k%09d" % i


def measure(entries: int, shard_entries: int) -> dict:
    shards.SHARD_ENTRIES = shard_entries  # read at each write-back: splits follow it
    state, directory = DictState(), shards.Directory()
    store = shards.ShardedStore(state, directory, False, state)
    store.update({_key(i): StoreValue(b"v%d" % i, i, "") for i in range(entries)})
    store.write_back()
    rng, seconds = random.Random(1), {}
    for batch in BATCHES:
        best = float("inf")
        for _ in range(2):
            keys = [_key(rng.randrange(entries)) for _ in range(batch)]
            started = time.perf_counter()
            store = shards.ShardedStore(state, shards.Directory(*directory.to_list()), False, state)
            store.prefetch(keys)
            for key in keys:
                store[key] = StoreValue(b"new", 5, "")
            store.write_back()
            best = min(best, time.perf_counter() - started)
        seconds[batch] = round(best, 3)
    return {"shard_entries": shard_entries, "shards": directory.shards, "seconds_by_batch_keys": seconds}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--sizes", default="4096,1024,512,256")
    args = parser.parse_args()
    gc.disable()  # as a task does while it processes
    rows = [measure(args.entries, int(size)) for size in args.sizes.split(",")]
    for row in rows:
        print(f"{row['shard_entries']:>6} per shard ({row['shards']} shards): "
              + "  ".join(f"{keys}: {s:.2f}s" for keys, s in row["seconds_by_batch_keys"].items()))
    out = Path(__file__).parent / "results" / f"shard-sizes-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps({"machine": machine(), "entries": args.entries, "rows": rows}, indent=2) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
