"""``python -m bertprobe``: the ``bertprobe`` command, for environments without the console script on PATH."""

from bertprobe.cli import entry_point

if __name__ == "__main__":
    entry_point()
