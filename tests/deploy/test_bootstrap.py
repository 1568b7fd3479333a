"""``scripts/bootstrap.sh`` never starts, stops or restarts a service of the host (issue 19).

The real script runs in a copy of the repository's layout whose ``PATH`` holds only the
tools it needs and shims of ``apt-get``, ``systemctl``, ``service``, ``invoke-rc.d`` and
``sudo`` that record every call (and, for ``apt-get install``, what ``policy-rc.d`` said at
that moment). Prometheus is absent from that ``PATH``, so the script installs it.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: What the script runs besides the shims (found on the host, linked into the test's PATH).
TOOLS = [
    "bash",
    "dirname",
    "sha1sum",
    "cut",
    "sort",
    "printf",
    "id",
    "rm",
    "touch",
    "tee",
    "chmod",
    "cat",
]

#: Every shim logs ``name args...``; apt-get install also logs what policy-rc.d answers.
SHIM = """#!/bin/bash
n=${0##*/}
echo "$n $*" >> "$CALLS"
if [ "$n" = apt-get ] && [ "$1" = install ]; then
  if [ -x "$POLICY_RC_D" ]; then "$POLICY_RC_D" prometheus start; echo "policy $?" >> "$CALLS"
  else echo "policy none" >> "$CALLS"; fi
fi
if [ "$n" = sudo ]; then exec "$@"; fi
if [ "$n" = systemctl ] && [ "$1" = is-active ]; then exit 0; fi
exit 0
"""


def _run(tmp_path: Path, policy: Path) -> list[str]:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", repo / "scripts" / "bootstrap.sh")
    for name in ("requirements.lock", "pyproject.toml"):
        shutil.copy(ROOT / name, repo / name)
    # An up-to-date virtualenv: its stamp is the one the script computes.
    venv_bin = repo / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text("#!/bin/sh\nexit 1\n")  # (no monitor.jars: no jars)
    (venv_bin / "python").chmod(0o755)
    digest = subprocess.run(
        "sha1sum requirements.lock pyproject.toml | sha1sum | cut -c1-12",
        shell=True, cwd=repo, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (repo / ".venv" / f".installed-{digest}").touch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found is not None, f"{tool} is needed to run bootstrap.sh"
        (bin_dir / tool).symlink_to(found)
    for shim in ("apt-get", "systemctl", "service", "invoke-rc.d", "sudo"):
        (bin_dir / shim).write_text(SHIM)
        (bin_dir / shim).chmod(0o755)
    calls = tmp_path / "calls.log"
    calls.touch()
    env = {
        "PATH": str(bin_dir),
        "PYTHON": sys.executable,
        "CALLS": str(calls),
        "POLICY_RC_D": str(policy),
        "HOME": "/",
    }
    proc = subprocess.run(
        [str(bin_dir / "bash"), str(repo / "scripts" / "bootstrap.sh"), "--no-jars"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "installing from Debian: prometheus" in proc.stdout
    return calls.read_text().splitlines()


def _no_service_touched(calls: list[str]) -> None:
    touched = [
        c for c in calls
        if c.split()[0] in ("systemctl", "service", "invoke-rc.d")
        and any(w in c.split() for w in ("start", "stop", "restart", "reload", "enable"))
    ]  # fmt: skip
    assert not touched, touched


def test_setup_installs_with_services_held_and_removes_its_policy(tmp_path: Path) -> None:
    policy = tmp_path / "policy-rc.d"
    calls = _run(tmp_path, policy)
    installs = [c for c in calls if c.startswith("apt-get install")]
    assert len(installs) == 1 and "prometheus" in installs[0]
    # While apt-get installed, policy-rc.d forbade every service action (101).
    assert calls[calls.index(installs[0]) + 1] == "policy 101", calls
    _no_service_touched(calls)
    assert not policy.exists()  # its own policy is gone afterwards


def test_an_existing_policy_rc_d_is_left_as_it_was(tmp_path: Path) -> None:
    policy = tmp_path / "policy-rc.d"
    text = "#!/bin/sh\n# the host's own policy\nexit 0\n"
    policy.write_text(text)
    policy.chmod(0o750)
    before = os.stat(policy)
    calls = _run(tmp_path, policy)
    assert policy.read_text() == text
    after = os.stat(policy)
    assert stat.S_IMODE(after.st_mode) == 0o750 and after.st_mtime_ns == before.st_mtime_ns
    assert "policy 0" in calls  # the host's policy answered, not one of ours
    _no_service_touched(calls)


@pytest.mark.parametrize("tool", ["systemctl", "service"])
def test_the_script_names_no_service_action(tool: str) -> None:
    """Belt and braces for paths the shims cannot reach: no line of the script runs one."""
    lines = (ROOT / "scripts" / "bootstrap.sh").read_text().splitlines()
    code = [ln for ln in lines if not ln.lstrip().startswith("#")]
    assert not [ln for ln in code if tool in ln.split()], code
