"""Spark's process: the session (the only module that starts Spark), its Java, SPARK_HOME,
class-data archive, scratch folders, the reaper of a JVM that outlives its command, the fork
server of a local JVM's Python processes, and the state stores a stopped query leaves loaded."""
