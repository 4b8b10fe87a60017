"""Dead letters' headers (KIP-1034) as kstool writes and reads them."""

from __future__ import annotations

from kstool.kafka.dead_letters import DeadLetter, error_headers, without_error_headers


def test_a_dead_letter_reads_back_what_its_headers_say():
    headers = [("trace", b"t-1"), *error_headers("kstool.InvalidRecord", None, "trace", "in", 3, 42)]
    assert ("__streams.errors.message", None) in headers, "no message: a header with a null value, as Kafka writes it"
    letter = DeadLetter.of(headers)
    assert letter == DeadLetter("kstool.InvalidRecord", None, "in", 3, 42)
    assert letter.summary() == "kstool.InvalidRecord (from in:3 offset 42)"
    assert without_error_headers(headers + [("kstool.dlq.app", b"app")]) == [("trace", b"t-1")]


def test_a_dead_letter_of_a_dead_letter_says_where_its_last_failure_was():
    first = error_headers("java.lang.NumberFormatException", 'For input string: "x"', "...", "in", 0, 1)
    second = error_headers("java.lang.IllegalStateException", "again", "...", "in-retry", 2, 7)
    assert DeadLetter.of(first + second) == DeadLetter("java.lang.IllegalStateException", "again", "in-retry", 2, 7)


def test_records_without_the_exception_header_are_not_dead_letters():
    assert DeadLetter.of([("__streams.errors.topic", b"in")]) is None
    assert DeadLetter.of([]) is None
