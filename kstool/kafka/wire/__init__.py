"""kstool's own Kafka client for the requests librdkafka does not make: record batches it
cannot write (timestamp 0), group and streams-group requests, transactions of a task's own, with
SASL. `protocol` holds the connection and the Produce request; `codec` the wire encoding."""
