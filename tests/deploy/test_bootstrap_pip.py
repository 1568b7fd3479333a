"""``scripts/bootstrap.sh`` installs pip itself from the hashed lock (issue 51, part 6).

Before, it ran ``pip install --upgrade pip``: whatever pip the index served that day,
outside the lock's hashes. Now pip's own entry is cut out of requirements.lock (its pin and
hashes) and installed with ``--require-hashes`` before the rest of the lock. Shown here on
the script's own command and the real lock; installing it into a fresh venv (and a tampered
hash refused) is what every clean-clone run of ``make setup`` does.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import pip_locked  # noqa: E402

SCRIPT = (REPO / "scripts" / "bootstrap.sh").read_text()


def _code() -> list[str]:
    return [ln for ln in SCRIPT.splitlines() if not ln.lstrip().startswith("#")]


def test_pip_is_never_upgraded_from_the_index() -> None:
    code = "\n".join(_code()).replace("\\\n", " ")  # continued lines joined
    assert "--upgrade pip" not in code and "-U pip" not in code
    # Every pip install of the script checks hashes, or installs the project itself.
    for install in re.findall(r"pip install[^\n]*", code):
        assert "--require-hashes" in install or "-e ." in install, install


@pytest.mark.skipif(shutil.which("awk") is None, reason="needs awk")
def test_the_scripts_cut_is_pips_hashed_entry_of_the_lock(tmp_path: Path) -> None:
    """The script's awk program, run on the real lock: pip's pin and its hashes, nothing
    else -- what ``pip install --require-hashes -r`` then installs."""
    program = re.search(r"awk '([^']+)'", SCRIPT)
    assert program is not None, "bootstrap.sh cuts pip's entry with awk"
    lock = (REPO / "requirements.lock").read_text()
    cut = subprocess.run(
        ["awk", program.group(1), str(REPO / "requirements.lock")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    entry = pip_locked.entries(lock)["pip"][1]
    assert cut == entry and cut.count("--hash=sha256:") >= 1
    # The same pip as the image's build stage (deploy/image/build-requirements.txt).
    build = (REPO / "deploy" / "image" / "build-requirements.txt").read_text()
    pinned = re.search(r"^pip==(\S+)", build, flags=re.M)
    assert pinned is not None and cut.startswith(f"pip=={pinned.group(1)} ")
