"""The lowest layer: what every other part of kstool builds on (exit codes and errors, names,
times, the home folder, serdes, Kafka Streams' store key layouts, the JSON documents as types)."""
