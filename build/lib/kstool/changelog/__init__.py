"""Changelog topic inspection: list, describe (with layout detection) and dump (decoded,
compacted view, follow) for kstool and Kafka Streams changelogs."""
