"""Kafka's default partitioner for keyed records (the Java client's murmur2, which
librdkafka's `murmur2_random` matches): partition = (murmur2(key) & 0x7fffffff) % n."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 as an unsigned 32-bit value."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def partitions_for(keys: list[bytes], partitions: int) -> np.ndarray:
    """partition_for of many keys at once: murmur2 in numpy over the keys of each length
    (uint32 arithmetic wraps as the Java int's does)."""
    import numpy as np  # here: the one-liners that partition record by record start without it

    lengths = np.fromiter(map(len, keys), np.int64, len(keys))
    hashes = np.empty(len(keys), np.uint32)
    m = np.uint32(_M)
    for length in np.unique(lengths).tolist():
        chosen = np.flatnonzero(lengths == length)
        data = np.frombuffer(b"".join([keys[i] for i in chosen.tolist()]), np.uint8).reshape(len(chosen), length)
        h = np.full(len(chosen), (0x9747B28C ^ length) & _MASK, np.uint32)
        whole = length - length % 4
        if whole:
            words = np.ascontiguousarray(data[:, :whole]).view("<u4")
            for i in range(whole // 4):
                k = words[:, i] * m
                k ^= k >> np.uint32(24)
                h = (h * m) ^ (k * m)
        rest = data[:, whole:].astype(np.uint32)
        if length % 4 == 3:
            h ^= rest[:, 2] << np.uint32(16)
        if length % 4 >= 2:
            h ^= rest[:, 1] << np.uint32(8)
        if length % 4:
            h = (h ^ rest[:, 0]) * m
        h ^= h >> np.uint32(13)
        h *= m
        h ^= h >> np.uint32(15)
        hashes[chosen] = h
    partition: np.ndarray = (hashes & np.uint32(0x7FFFFFFF)) % np.uint32(partitions)
    return partition
