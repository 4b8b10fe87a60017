from kstool.errors import KstoolError, NotFoundError


class KafkaOperationError(KstoolError):
    pass


class TopicNotFoundError(NotFoundError):
    def __init__(self, topic: str):
        super().__init__(f"topic {topic!r} does not exist")
        self.topic = topic


class GroupNotFoundError(NotFoundError):
    def __init__(self, group: str):
        super().__init__(f"consumer group {group!r} does not exist")
        self.group = group
