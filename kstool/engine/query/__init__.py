"""A run's query: planned once (run_plan, prepare, seed), built (streaming_query), driven fresh
or resumed parked (parking), watched batch by batch (batches), restarted after an outage."""
