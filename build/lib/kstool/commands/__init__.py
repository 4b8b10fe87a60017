"""kstool's click commands: parse options, call the kstool library, render. Nothing else."""
