"""The stranger's install: the README's install block, run as written in a copy of the tree,
into a fresh ``$HOME`` outside the repository (``python tests/stranger/install.py [DIR]``,
default :data:`FOLDER`).

Run by ``tests/stranger/test_strangers_cluster.py`` -- in the background from the session's
start when the session holds that test (``tests/background.py``: the install is minutes of
downloads and unpacking the other tests need not wait for), else in the test itself. It
writes ``DIR/install.json``: the seconds the install took, its exit code and its output's
tail. ``MONITOR_STRANGER_COLD=1``: caches of its own (a clean machine's first install).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Where the stranger's home, clone and venv go: outside the repository.
FOLDER = Path(tempfile.gettempdir()) / f"kafka-replication-monitor-stranger-{os.getuid()}"


def readme_block(marker: str) -> str:
    """The shell block after ``<!-- stranger: MARKER -->`` in README.md."""
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- stranger: {marker} -->\s*```bash\n(.*?)```", text, re.S)
    if not m:
        raise SystemExit(f"README.md has no block marked <!-- stranger: {marker} -->")
    return m.group(1)


def stranger_env(home: Path) -> dict[str, str]:
    """A shell of someone else's: a fresh home, no project venv on PATH, nothing of the
    project's settings; the machine's pip and jar caches unless MONITOR_STRANGER_COLD=1."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MONITOR_", "PYTHON", "VIRTUAL_ENV"))
    }
    env["HOME"] = str(home)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".venv" not in p)
    if os.environ.get("MONITOR_STRANGER_COLD") != "1":
        env["PIP_CACHE_DIR"] = str(Path.home() / ".cache" / "pip")
        env["MONITOR_CACHE"] = str(ROOT / ".cache")
    return env


def copy_tree(dest: Path) -> Path:
    """The repository's files, as a clone holds them (tracked and changed ones)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.split(b"\0")  # fmt: skip
    for raw in filter(None, listed):
        name = raw.decode()
        source = ROOT / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the work tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    return dest


def install(folder: Path) -> dict[str, object]:
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "home").mkdir(parents=True)
    began = time.monotonic()
    copy_tree(folder / "work" / "kafka-replication-monitor")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", readme_block("install")],
        cwd=folder / "work", env=stranger_env(folder / "home"),
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    outcome = {
        "seconds": round(time.monotonic() - began, 1),
        "returncode": done.returncode,
        "output": (done.stdout + done.stderr)[-4000:],
        "cold": os.environ.get("MONITOR_STRANGER_COLD") == "1",
    }
    (folder / "install.json").write_text(json.dumps(outcome, indent=2))
    return outcome


if __name__ == "__main__":
    result = install(Path(sys.argv[1]).resolve() if sys.argv[1:] else FOLDER)
    print(f"the README's install: exit {result['returncode']} in {result['seconds']} s")
    sys.exit(0 if result["returncode"] == 0 else 1)
