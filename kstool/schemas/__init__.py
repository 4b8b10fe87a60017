"""Schema-aware record formats (Avro, Protobuf, JSON Schema): the Confluent wire format, schemas
from a Schema Registry or from local files, codecs between record bytes and JSON-able values,
and (kstool.schemas.formats) the decoders and encoders the commands and the engine's source use."""
