"""produce's batch path splits its input into lines as the line-by-line path does (its oracle),
however the input arrives."""

from __future__ import annotations

import io

from hypothesis import example, given, strategies as st

from kstool.kafka.bulk_lines import _line_blocks
from kstool.kafka.produce import _lines


class Chunked(io.RawIOBase):
    """A pipe that hands its bytes over in the given pieces (none empty: that is its end)."""

    def __init__(self, pieces: list[bytes]):
        self.pieces = [piece for piece in pieces if piece]

    def read1(self, size: int = -1) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""


@given(st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"x", b"\n").replace(b"y", b"\r")), max_size=8))
@example([b"a\r", b"\nb\n", b"c"])  # a CRLF split between two reads
def test_blocks_hold_the_lines_the_line_by_line_path_reads(pieces):
    data = b"".join(pieces)
    assert [line for block in _line_blocks(Chunked(pieces)) for line in block] == [
        line for _, line in _lines(io.BytesIO(data))]
