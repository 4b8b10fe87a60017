from kstool.base.errors import KstoolError, NotFoundError
from kstool.base.names import did_you_mean


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
    def __init__(self, group: str, known: list[str] | None = None):
        """known: the groups there are, to name the nearest (a typo at 3 a.m.)."""
        super().__init__(f"consumer group {group!r} does not exist" + did_you_mean(group, known or []))
        self.group = group


class AuthorizationError(KstoolError):
    """The broker's ACLs refused an operation on a resource: both named, in the words of
    Kafka's ACLs (`kafka-acls --operation READ --topic orders`)."""

    def __init__(self, kind: str, name: str | None, operation: str | None, principal: str | None):
        resource = f"{kind} {name!r}" if name is not None else kind
        doing = f"to {operation} {resource}" if operation else f"on {resource}"
        who = f" as {principal}" if principal else ""  # ClientConfig.principal
        super().__init__(f"not authorized {doing}{who} (no ACL of the broker allows it)")
        self.kind, self.name, self.operation = kind, name, operation


class AuthenticationError(KstoolError):
    """The broker refused the client's credentials or the client the broker's certificate."""
