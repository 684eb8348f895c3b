"""Pure analysis of recorded captures: no torch, no CUDA driver. Everything here runs on
snapshots and plain Python objects, so it is tested on any machine (tests/test_architecture.py
holds that this package imports neither torch nor the driver shim)."""
