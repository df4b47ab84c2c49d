"""Is the Hugging Face Hub reachable? Answer fast, so that offline machines fail in a second, not after
half a minute of retries."""

from __future__ import annotations

import os
import socket
from functools import lru_cache
from urllib.parse import urlparse

from bertprobe.environment import env_flag

OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def offline_mode() -> bool:
    """Whether the user asked for offline mode (HF_HUB_OFFLINE=1 and friends): use caches only."""
    return any(env_flag(v) for v in OFFLINE_VARS)


@lru_cache(maxsize=1)
def hub_reachable(timeout: float = 3.0) -> bool:
    """False in offline mode or when a TCP connection to the hub fails; True behind a proxy."""
    if offline_mode():
        return False
    if any(os.environ.get(v) for v in PROXY_VARS):
        return True  # a direct connection test says nothing about the proxy
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def quiet_hub_logs() -> None:
    """Silence huggingface_hub's retry warnings; bertprobe reports failures itself, on one line."""
    try:
        from huggingface_hub.utils import logging as hub_logging

        hub_logging.set_verbosity_error()
    except ImportError:  # pragma: no cover - huggingface_hub always comes with transformers
        pass
