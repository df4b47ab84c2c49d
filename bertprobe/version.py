"""bertprobe's version, in a module of its own so that any floor may read it."""

__version__ = "0.1.0"
