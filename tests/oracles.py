"""Reference results computed the plainest way, for the tests to compare kstool against."""

from __future__ import annotations

import re
from collections import Counter


def word_counts(lines) -> Counter:
    """wordcount's reference: lower-cased runs of \\w (letters, digits, underscore)."""
    return Counter(w for line in lines for w in re.findall(r"\w+", line.lower()))
