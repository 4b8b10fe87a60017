"""The apps kstool finds in a state dir: list and describe them (describe), watch them (top)."""
