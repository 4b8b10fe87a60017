"""The per-task runtime: how a kstool processor (kstool.streams) runs inside Spark's
transformWithState, a task per input partition (processor), in stages of tasks joined inside
the query where Kafka Streams has repartition topics (repartition), its stores held as shards
of state entries (shards, map_state), and the records the source combines or packs before they
reach a task (combiners). Between the processors and the topologies, which choose it."""
