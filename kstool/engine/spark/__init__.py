"""Spark's process: the session (the only module that starts Spark), its Java, SPARK_HOME,
class-data archive, scratch folders, the reaper of a JVM that outlives its command, and the
state stores a stopped query leaves loaded."""
