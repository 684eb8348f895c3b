"""What a run reads: which files (`discovery`: Python files and notebooks, their display
names and module names) and how a notebook becomes one Python module (`notebooks`)."""
