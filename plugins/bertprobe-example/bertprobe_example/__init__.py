"""Example bertprobe plugin (see probe.py)."""
