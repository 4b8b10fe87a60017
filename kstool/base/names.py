"""Validation of names that become paths or topic names (application ids, store names),
Kafka Streams' names of an application's topics, and the nearest of known names to a typo."""

from __future__ import annotations

import re

from kstool.base.errors import UsageError

_LEGAL = re.compile(r"[A-Za-z0-9._-]+")
_ILLEGAL = re.compile(r"[^A-Za-z0-9._-]")
MAX_LENGTH = 249


def validate_name(value: str, what: str = "application id") -> str:
    """Kafka's own rules for topic names, applied before anything touches disk or brokers."""
    if not value:
        problem = "it is empty"
    elif value in (".", ".."):
        problem = "'.' and '..' are not allowed"
    elif len(value) > MAX_LENGTH:
        problem = f"{len(value)} characters, at most {MAX_LENGTH} are allowed"
    elif not _LEGAL.fullmatch(value):
        bad = sorted(set(_ILLEGAL.findall(value)))
        problem = f"{', '.join(repr(c) for c in bad)} not allowed; use letters, digits, '.', '_' and '-'"
    else:
        return value
    shown = value if len(value) <= 60 else value[:57] + "..."
    raise UsageError(f"invalid {what} {shown!r}: {problem}")


def validate_topic(name: str) -> str:
    return validate_name(name, "topic name")


def changelog_topic(app_id: str, store: str) -> str:
    return f"{app_id}-{store}-changelog"


INTERNAL_SUFFIXES = ("-changelog", "-repartition", "-subscription-registration-topic",
                     "-subscription-response-topic")
FK_JOIN_TOPIC = re.compile(r".+-KTABLE-FK-JOIN-SUBSCRIPTION-(REGISTRATION|RESPONSE)-\d+-topic")


def detect_internal_topics(app_id: str, topics: list[str], excluded: set[str]) -> list[str]:
    """Kafka Streams' rule: `<app-id>-` prefix, an internal suffix, not an input/intermediate."""
    prefix = f"{app_id}-"
    return sorted(t for t in topics if t.startswith(prefix) and t not in excluded
                  and (t.endswith(INTERNAL_SUFFIXES) or FK_JOIN_TOPIC.fullmatch(t)))


def did_you_mean(name: str, known: list[str]) -> str:
    """The hint that ends a "not found" error: `; did you mean 'x'?` naming the known name
    nearest to `name` (a typo at 3 a.m.), or nothing. difflib is imported here: at module level
    it cost every kstool process, Spark's Python processes among them, ~17 ms of its start
    (python -X importtime)."""
    import difflib

    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
