#!/usr/bin/env python3
"""Write requirements.lock's hashes: every distribution file PyPI serves for each pinned
version (so ``pip install --require-hashes`` verifies whichever wheel or sdist a machine
picks), from PyPI's simple index (PEP 691's JSON form, which pip itself reads).

The pins themselves are chosen by hand (``name==version``, one per line); this script
only (re)writes the ``--hash`` lines under them. Usage::

    .venv/bin/python scripts/lock.py            # rewrite requirements.lock in place
    .venv/bin/python scripts/lock.py --check    # exit 1: a pin without hashes, or stale
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

LOCK = Path(__file__).resolve().parents[1] / "requirements.lock"
HEADER = (
    "# Pinned with hashes: the pins by hand, the hashes by scripts/lock.py (every file PyPI\n"
    "# serves for the version). Installed with pip's --require-hashes (scripts/bootstrap.sh,\n"
    "# scripts/pip_locked.py).\n"
)
_PIN = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+)")


def pins(text: str) -> list[tuple[str, str]]:
    """The ``(name, version)`` pins of a lock, with or without hash lines.

    >>> pins("a==1 \\\\\\n    --hash=sha256:00\\nb_c==2.0\\n# note\\n")
    [('a', '1'), ('b_c', '2.0')]
    """
    out = []
    for line in text.splitlines():
        m = _PIN.match(line.strip())
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def _version_of(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        if filename.endswith((".tar.gz", ".zip")):
            return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return None


def hashes(name: str, version: str) -> list[str]:
    req = urllib.request.Request(
        f"https://pypi.org/simple/{canonicalize_name(name)}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        files = json.load(resp)["files"]
    want = Version(version)
    found = sorted({f["hashes"]["sha256"] for f in files if _version_of(f["filename"]) == want})
    if not found:
        raise SystemExit(f"lock: PyPI serves no files for {name}=={version}")
    return found


def render(entries: list[tuple[str, str, list[str]]]) -> str:
    lines = [HEADER]
    for name, version, digests in sorted(entries, key=lambda e: e[0].lower()):
        lines.append(f"{name}=={version} \\\n")
        lines.append(" \\\n".join(f"    --hash=sha256:{d}" for d in digests) + "\n")
    return "".join(lines)


#: Installed beside the lock's pins and not to be removed: the venv's own tools, the project.
NOT_LOCKED = {"pip", "setuptools", "kafka-replication-monitor"}


def leftovers(text: str, installed: list[str]) -> list[str]:
    """The installed distributions (``installed``: their names) the lock does not name --
    left by an earlier lock, since an install only ever adds (scripts/bootstrap.sh removes
    them).

    >>> leftovers("six==1.16.0", ["six", "urllib3_future", "pip"])
    ['urllib3-future']
    """
    locked = {canonicalize_name(n) for n, _ in pins(text)} | NOT_LOCKED
    return sorted({str(canonicalize_name(n)) for n in installed} - locked)


def main(argv: list[str]) -> int:
    text = LOCK.read_text()
    if "--leftovers" in argv:  # bootstrap.sh: what to remove from the venv
        from importlib.metadata import distributions

        print(" ".join(leftovers(text, [d.metadata["Name"] for d in distributions()])))
        return 0
    entries = [(n, v, hashes(n, v)) for n, v in pins(text)]
    new = render(entries)
    if "--check" in argv:
        if new != text:
            print("lock: requirements.lock's hashes are missing or stale: run scripts/lock.py")
            return 1
        return 0
    LOCK.write_text(new)
    print(f"lock: {len(entries)} pins, {sum(len(e[2]) for e in entries)} hashes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
