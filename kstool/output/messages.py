"""One-line notes for people, on stderr: stdout stays free for data."""

from __future__ import annotations

import sys


def plural(count: int, noun: str) -> str:
    """`1 partition`, `2 partitions`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def info(message: str) -> None:
    """A human note on stderr (never mixed into data on stdout)."""
    sys.stderr.write(message + "\n")


def warn(message: str) -> None:
    sys.stderr.write(f"kstool: warning: {message}\n")
