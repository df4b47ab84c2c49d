"""Built-in probes; each module is a plugin registered through ``bertprobe_register_probes``."""
