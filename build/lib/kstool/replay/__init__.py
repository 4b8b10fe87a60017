"""`kstool replay`: copy a slice of a topic (or a jsonl dump) into a topic for reprocessing."""
