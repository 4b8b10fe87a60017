"""Schema-aware record formats (Avro first; Protobuf and JSON Schema to follow): the Confluent
wire format, schemas from a Schema Registry or from local files, and codecs between record bytes
and JSON-able values. Commands take them through kstool.serdes."""
