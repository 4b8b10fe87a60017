"""How many shuffle partitions a per-task topology needs (pure Python: the runtime asks
before it builds the query, and wordcount runs should not import the task machinery)."""

from __future__ import annotations


def _spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's hash() of an int column (Murmur3_x86_32.hashInt), as a signed 32-bit int."""
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    k1 = rotl((value * 0xCC9E2D51) & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
    h1 = (rotl(seed ^ k1, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & 0xFFFFFFFF
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def shuffle_partitions_for(tasks: int) -> int:
    """The fewest shuffle partitions (>= tasks) that give tasks 0..tasks-1 one partition each,
    so they run in parallel: Spark places a group by hash(task) mod partitions, and with
    partitions == tasks two tasks often share one and run one after the other."""
    partitions = tasks
    while len({_spark_hash_int(t) % partitions for t in range(tasks)}) < tasks:
        partitions += 1
    return partitions
