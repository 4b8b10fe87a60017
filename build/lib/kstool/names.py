"""Validation of names that become paths or topic names (application ids, store names)."""

from __future__ import annotations

import re

from kstool.errors import UsageError

_LEGAL = re.compile(r"[A-Za-z0-9._-]+")
MAX_LENGTH = 249


def validate_name(value: str, what: str = "application id") -> str:
    """Kafka's own rules for topic names, applied before anything touches disk or brokers."""
    if not value or value in (".", "..") or len(value) > MAX_LENGTH or not _LEGAL.fullmatch(value):
        raise UsageError(
            f"invalid {what} {value!r}: use letters, digits, '.', '_' and '-' "
            f"(at most {MAX_LENGTH} characters, not '.' or '..')")
    return value


def changelog_topic(app_id: str, store: str) -> str:
    return f"{app_id}-{store}-changelog"

