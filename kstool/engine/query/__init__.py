"""A run's query: planned once (run_plan, prepare, seed), its Spark started and the query built
(streaming_query, build), driven fresh or parked in the warm engine (drivers, parking), watched
batch by batch (batches), started again after a Kafka outage (outage)."""
