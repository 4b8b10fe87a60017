"""Which error events of a consumer end its read."""

from __future__ import annotations

from confluent_kafka import KafkaError


def ends_the_read(err: KafkaError, uses_group: bool = False) -> bool:
    """Whether a consumer's error event ends its read: not the end of a partition, not a
    retriable error, and for a consumer that only assigns, not its group's refusal: librdkafka
    looks up the coordinator of the group.id it insists on, and on a secured cluster a user
    without rights on that group is refused there, although the read never uses the group."""
    code = err.code()
    if code == KafkaError._PARTITION_EOF or err.retriable():
        return False
    return uses_group or code != KafkaError.GROUP_AUTHORIZATION_FAILED
