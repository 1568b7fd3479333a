"""Where the lab keeps its jars, its Maven repository and its cluster folders.

Everything the lab downloads or writes lives under one *cache root* so that a clean
checkout can be set up with one command and wiped with one ``rm -rf``. The root is
``$MONITOR_CACHE`` when set, else ``<repo>/.cache``; the repository root is found from this
file's location rather than the working directory, so the commands behave the same from
any folder.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The repository checkout this package lives in (``monitor/lab/paths.py`` -> repo root).
REPO_ROOT: Path = Path(__file__).resolve().parents[2]

#: The Maven POM that lists the lab's jar sets (one profile per set).
POM_PATH: Path = REPO_ROOT / "deploy" / "pom.xml"


def cache_root() -> Path:
    """The cache root: ``$MONITOR_CACHE`` or ``<repo>/.cache``.

    The folder is created on first use, with a ``.gitignore`` holding ``*`` so that the
    hundreds of megabytes of jars and cluster data never show up in ``git status``.
    """
    env = os.environ.get("MONITOR_CACHE")
    root = Path(env).expanduser().resolve() if env else REPO_ROOT / ".cache"
    root.mkdir(parents=True, exist_ok=True)
    ignore = root / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    return root


def maven_repo() -> Path:
    """The private Maven repository (``-Dmaven.repo.local``), reused across runs."""
    return cache_root() / "m2"


def jars_root() -> Path:
    """Parent folder of the resolved jar sets."""
    return cache_root() / "jars"


def default_lab_dir() -> Path:
    """Default work folder of a lab cluster (data, logs, configs, state file)."""
    return cache_root() / "lab"
