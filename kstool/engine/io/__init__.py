"""Kafka I/O inside the query: the streaming source and its readers (input and changelogs),
the sinks (driver transaction, executor writers, a transaction per task), the packed rows
they exchange, and --on-error's dead letters."""
