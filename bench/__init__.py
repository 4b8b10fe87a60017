"""kstool's benchmarks: `python -m bench` (or `make bench`)."""
