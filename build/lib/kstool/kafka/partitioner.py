"""Kafka's default partitioner for keyed records (the Java client's murmur2, which
librdkafka's `murmur2_random` matches): partition = (murmur2(key) & 0x7fffffff) % n."""

from __future__ import annotations

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
