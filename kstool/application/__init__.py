"""A kstool application on disk, without Spark: its manifest, paths, run lock and the Spark
checkpoint's logs (which batches committed, and where each ended)."""
