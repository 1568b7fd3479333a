"""Where the lab keeps its cluster folders (jars and the Maven repository: :mod:`monitor.jars`).

Everything the lab downloads or writes lives under one *cache root*
(:func:`monitor.jars.cache_root`: ``$MONITOR_CACHE``, else ``<repo>/.cache``), so that a
clean checkout can be set up with one command and wiped with one ``rm -rf``.
"""

from __future__ import annotations

from pathlib import Path

from monitor.assets import checkout_root
from monitor.jars import cache_root

#: The checkout the development package runs from (it is not in the wheel).
REPO_ROOT: Path = checkout_root() or Path(__file__).resolve().parents[3]

__all__ = ["REPO_ROOT", "cache_root", "default_lab_dir"]


def default_lab_dir() -> Path:
    """Default work folder of a lab cluster (data, logs, configs, state file)."""
    return cache_root() / "lab"
