"""Records combined where the source reads them (kstool.contract.CombinerSpec): per group and
partition range one partial row (count, sum, min, max, whether all numbers were whole, newest
timestamp, last offset) crosses into Spark instead of every record.

NumberCombiner (the keyed aggregation) takes a record when its number reads the same here as in
Spark SQL: a key, a value, and for sum/min/max a plain decimal text (no spaces, no special
words) or an 8-byte long or double, finite. WordCombiner (wordcount) takes the lines that are
ASCII, where Arrow's lower-casing and word split are Spark's. Neither takes a record with
headers: Spark keeps a group's last ones. WindowCombiner (counts in time windows) takes a
record with a key, a value and a timestamp that has an open window; a partial keeps its last
record's headers.
RecordPacker (session counts, joins: processors that need every record) packs the records
Spark would pass on as they are, a row per Arrow batch (or per ~4 MiB). Every other record
stays a row of its own and takes the Spark path as before (--on-error included), so the
results do not depend on which records were combined.

Which topologies combine is decided here (the specs, read wherever a topology is named: no
Arrow imported); the Arrow work lives in the modules, imported by the source's readers."""

from __future__ import annotations

from kstool.contract import CombinerSpec
from kstool.streams.windows import WindowSpec

# wordcount's word separators: one pattern that Java (Spark's split) and RE2 (Arrow's) read alike
NON_WORD = r"[^\p{L}\p{N}_]+"
COMBINED_FORMATS = ("text", "long", "double")
COMBINED_AGGREGATIONS = ("count", "sum", "min", "max")  # avg: Spark keeps its own sum and count

WORD_SPEC = CombinerSpec(f"{__name__}.words:WordCombiner", {})


def number_spec(agg: str, group_by: str, input_value_format: str) -> CombinerSpec | None:
    if group_by != "key" or agg not in COMBINED_AGGREGATIONS or input_value_format not in COMBINED_FORMATS:
        return None
    return CombinerSpec(f"{__name__}.numbers:NumberCombiner", {"agg": agg, "input_value_format": input_value_format})


def pack_spec(keyed_values: bool) -> CombinerSpec:
    """Every record packed, for a processor that needs each (RecordPacker: which it takes)."""
    return CombinerSpec(f"{__name__}.packs:RecordPacker", {"keyed_values": keyed_values}, reduces=False)


def window_spec(window: WindowSpec, grace: int, agg: str, group_by: str, time: str,
                input_value_format: str) -> CombinerSpec | None:
    """Counts in time windows of the record's timestamp, per record key (the task is the input
    partition, whose records the source reads in order); session counts packed (merging follows
    the records one by one)."""
    if (window.kind == "sliding" or agg != "count" or group_by != "key" or time != "record"
            or input_value_format not in COMBINED_FORMATS):
        return None
    if window.kind == "session":
        return pack_spec(keyed_values=True)
    return CombinerSpec(f"{__name__}.window_counts:WindowCombiner",
                        {"size": window.size, "advance": window.advance, "grace": grace}, counts_late=True)
