"""pluggy's two markers for project ``bertprobe``: ``hookimpl``, which every plugin's hooks wear, and
``hookspec``, which ``hookspecs`` puts on each hook. On the ground floor, so that every wing can register
its built-in plugin without importing the hook specifications."""

import pluggy

PROJECT = "bertprobe"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
