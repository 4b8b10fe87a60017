"""An app's Spark streaming checkpoint, read without a query: where it is (`location.py`), its
files wherever they are (`files.py`: a local folder, or a Hadoop file system through Spark's
JVM), and what its logs say (`logs.py`: committed batches, their offsets, what a rollback
removes). The state it holds is read by kstool.state.from_checkpoint."""
