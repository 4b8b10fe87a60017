"""What the keyed and the windowed aggregation share: where a record's number and group key
come from, which records are valid, and their Topology#describe() nodes.

Numbers come from the value as text (default), as Kafka's 8-byte Long or Double, or from a
field (`--value-field a.b`) of a JSON value, or of an Avro, Protobuf or JSON Schema one (the
engine's source decodes those to JSON, the `value_json` column). Groups: the record key, a JSON field of the value
(`--group-by field:PATH`), or a delimited field of a text value (`split:SEP:N`), as Kafka Streams'
groupBy re-keys (kstool.streams.key_mappers). Values that are not numbers (or
not JSON where JSON is read) follow --on-error; null values and null group keys are ignored,
as Kafka Streams ignores them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kstool.application.model import StoreSpec
from kstool.base.errors import UsageError
from kstool.base.serdes import SCHEMA_FORMATS
from kstool.contract import BATCH_TIME, RESTORED, VALUE_JSON
from kstool.streams.accumulators import AGGREGATIONS
from kstool.streams.key_mappers import KeyMapper, key_mapper

if TYPE_CHECKING:
    from pyspark.sql import Column

INPUT_FORMATS = ("text", "long", "double", "json", *SCHEMA_FORMATS)
VALUE_FORMATS = ("auto", "string", "json")
INVALID_REASON = "not a number (or not JSON)"
GROUP_BY_FORMS = ("key", "field", "split")


@dataclass
class NumberInput:
    agg: str = "count"
    value_field: str | None = None
    group_by: str = "key"  # key | field:PATH | split:SEP:N
    input_value_format: str = "text"
    group_mapper: KeyMapper = field(init=False)

    def __post_init__(self) -> None:
        if self.agg not in AGGREGATIONS:
            raise UsageError(f"--agg must be one of {', '.join(AGGREGATIONS)}")
        self.group_mapper = key_mapper(self.group_by, "--group-by", GROUP_BY_FORMS)
        if self.value_field and self.input_value_format not in ("json", "text", *SCHEMA_FORMATS):
            raise UsageError("--value-field reads a field: use --input-value-format json, avro or protobuf")
        if self.value_field and self.input_value_format == "text":
            self.input_value_format = "json"

    def parameters(self) -> dict[str, Any]:
        return {"agg": self.agg, "value_field": self.value_field, "group_by": self.group_by,
                "input_value_format": self.input_value_format}

    @property
    def structured(self) -> bool:
        """Values whose number and group key are fields (JSON, or decoded to it)."""
        return self.input_value_format in ("json", *SCHEMA_FORMATS)

    def json_text(self) -> Column:
        """The value as JSON text (Avro and Protobuf values decoded by the source)."""
        from pyspark.sql import functions as F

        return F.col(VALUE_JSON if self.input_value_format in SCHEMA_FORMATS else "value").cast("string")

    def number(self) -> Column:
        """The record's number as a double (null when it is not one)."""
        from pyspark.sql import functions as F

        if self.input_value_format == "long":
            return decode_long(F.col("value")).cast("double")
        if self.input_value_format == "double":
            return decode_double(F.col("value"))
        if self.structured:
            path = "$." + (self.value_field or "value")
            return F.get_json_object(self.json_text(), path).try_cast("double")
        return F.trim(F.col("value").cast("string")).try_cast("double")

    def group_key(self) -> Column:
        from pyspark.sql import functions as F

        mapper = self.group_mapper
        if mapper.kind == "key":
            return F.col("key")
        if mapper.kind == "field":
            return F.encode(F.get_json_object(self.json_text(), "$." + mapper.path), "UTF-8")
        fields = F.split(F.col("value").cast("string"), _java_literal(mapper.separator.decode()))
        return F.encode(F.try_element_at(fields, F.lit(mapper.index + 1)), "UTF-8")

    def valid(self) -> Column:
        from pyspark.sql import functions as F

        # null values and null group keys are ignored (build drops them), as in Kafka Streams
        json_ok = (F.get_json_object(self.json_text(), "$").isNotNull()
                   if self.structured or self.group_mapper.kind == "field" else F.lit(True))
        number_ok = F.lit(True) if self.agg == "count" else self.number().isNotNull()
        return F.col("value").isNull() | F.coalesce(json_ok & (number_ok | self.group_key().isNull()), F.lit(False))


def _java_literal(text: str) -> str:
    """A regex (Java's, which Spark's split takes) matching `text` as it is: Pattern.quote."""
    return "\\Q" + text.replace("\\E", "\\E\\\\E\\Q") + "\\E"


def describe(name: str, input_topic: str, output_topic: str, store: StoreSpec, group_by: str,
             spark: str, final: bool) -> dict[str, Any]:
    """Topology#describe() of groupBy(...).aggregate(...) [.suppress(untilWindowCloses)]."""
    aggregate = "KSTREAM-AGGREGATE-0000000002"
    select = "KSTREAM-SELECTKEY-0000000001" if group_by != "key" else None
    nodes = [{"name": "KSTREAM-SOURCE-0000000000", "type": "source", "topics": [input_topic],
              "successors": [select or aggregate]}]
    if select:
        nodes.append({"name": select, "type": "processor", "stores": [], "successors": [aggregate],
                      "spark": f"re-key by {group_by} (the task stands in for the repartition topic)"})
    chain = ["KTABLE-SUPPRESS-0000000003"] if final else []
    chain += ["KTABLE-TOSTREAM-0000000004", "KSTREAM-SINK-0000000005"]
    nodes.append({"name": aggregate, "type": "processor", "stores": [store.name], "successors": chain[:1],
                  "spark": spark})
    for node_name, successor in zip(chain, chain[1:] + [None]):
        if successor is None:
            nodes.append({"name": node_name, "type": "sink", "topic": output_topic})
        else:
            node = {"name": node_name, "type": "processor", "stores": [], "successors": [successor]}
            if node_name.startswith("KTABLE-SUPPRESS"):
                node["spark"] = "untilWindowCloses: emit each window once, when it closes (end + grace reached by stream time)"
            nodes.append(node)
    return {"topology": name, "sub_topologies": [{"id": 0, "nodes": nodes}],
            "stores": [{"name": store.name, "kind": store.kind, "changelog_topic": store.changelog_topic,
                        "key_format": store.key_format, "value_format": store.value_format}]}


def restored_number(value_format: str) -> Column:
    """A restored store entry's value (kstool.contract.RESTORED rows) as the aggregation's
    number, read with the store's serde (kstool.streams.accumulators.store_format): 8 bytes as
    kstool's `number` (a count's long reads as one), else the number as text."""
    from pyspark.sql import functions as F

    value = F.col("value")
    if value_format != "auto":
        return F.trim(value.cast("string")).try_cast("double")
    high = F.shiftrightunsigned(F.conv(F.hex(value), 16, -10).cast("long"), 52)
    return F.when(high.isin(0, 0xFFF), decode_long(value).cast("double")).otherwise(decode_double(value))


def decode_long(column: Column) -> Column:
    """Kafka's LongSerializer bytes -> long, in Spark SQL (null unless 8 bytes)."""
    from pyspark.sql import functions as F

    return F.when(F.length(column) == 8, F.conv(F.hex(column), 16, -10).cast("long"))


def decode_double(column: Column) -> Column:
    """Kafka's DoubleSerializer bytes -> double, in Spark SQL (exact; no Python per record)."""
    from pyspark.sql import functions as F

    bits = F.conv(F.hex(column), 16, -10).cast("long")
    sign = F.when(F.shiftrightunsigned(bits, 63) == 1, -1.0).otherwise(1.0)
    exponent = F.shiftright(bits, 52).bitwiseAND(2047)
    mantissa = bits.bitwiseAND((1 << 52) - 1).cast("double") / float(2 ** 52)
    value = (F.when(exponent == 0, mantissa * F.pow(F.lit(2.0), F.lit(-1022)))
             .when(exponent == 2047, F.when(mantissa == 0, F.lit(float("inf"))).otherwise(F.lit(float("nan"))))
             .otherwise((mantissa + 1.0) * F.pow(F.lit(2.0), exponent.cast("double") - 1023)))
    return F.when(F.length(column) == 8, sign * value)


def last_headers_columns() -> tuple[Column, Column]:
    """A row's headers and its place in processing order: the micro-batch (BATCH_TIME), then
    its offset; none for a restored store entry, which forwards nothing."""
    from pyspark.sql import functions as F

    processed = F.struct(F.col(BATCH_TIME).alias("batch"), F.col("offset").alias("offset"))
    return F.col("headers"), F.when(~F.col(RESTORED), processed).alias("processed")


def last_headers() -> Column:
    """A group's headers: its last record's, which Kafka Streams forwards with the update (its
    record cache keeps the last update's context). Within a micro-batch, of records from
    several partitions the one with the highest offset."""
    from pyspark.sql import functions as F

    return F.max_by("headers", "processed").alias("headers")
