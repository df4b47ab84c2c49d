"""Probe ``serving-skew``: does the served model give the reference's (the audited checkpoint's) outputs?"""

from __future__ import annotations
