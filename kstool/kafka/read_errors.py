"""Which error events of a consumer end its read."""

from __future__ import annotations

from confluent_kafka import KafkaError

# a partition's leader moving (a node lost or restarted): asked again, its answer comes
LEADER_MOVING = {
    KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.OFFSET_NOT_AVAILABLE,  # a new leader whose high watermark is not caught up yet
}


def ends_the_read(err: KafkaError, uses_group: bool = False) -> bool:
    """Whether a consumer's error event ends its read: not the end of a partition, not a
    retriable error nor a leader moving (librdkafka finds the new one), and for a consumer that
    only assigns, not its group's refusal: librdkafka looks up the coordinator of the group.id it
    insists on, and on a secured cluster a user without rights on that group is refused there,
    although the read never uses the group."""
    code = err.code()
    if code == KafkaError._PARTITION_EOF or err.retriable() or code in LEADER_MOVING:
        return False
    return uses_group or code != KafkaError.GROUP_AUTHORIZATION_FAILED
