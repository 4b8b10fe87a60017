from kstool.base.errors import KstoolError, NotFoundError


class KafkaOperationError(KstoolError):
    pass


class BadInputLine(KstoolError):
    """produce: a line that cannot become a record (with --on-error fail)."""


class EnvelopeError(ValueError):
    """A `consume -o jsonl` envelope that cannot be read back into a record."""


class TopicNotFoundError(NotFoundError):
    def __init__(self, topic: str):
        super().__init__(f"topic {topic!r} does not exist")
        self.topic = topic


class GroupNotFoundError(NotFoundError):
    def __init__(self, group: str):
        super().__init__(f"consumer group {group!r} does not exist")
        self.group = group
