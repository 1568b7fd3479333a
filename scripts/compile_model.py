#!/usr/bin/env python3
"""Compile the watermark model with mypyc (see monitor/model/_native.py).

    .venv/bin/python scripts/compile_model.py [--dest DIR] [--force]

Builds the modules of ``monitor.model._native.COMPILED`` from a copy of the sources in a
temporary directory (the checkout gets no build files), then installs them in DIR
(default ``.cache/native-model``) as ``model/*.so``, ``lib/<group>__mypyc*.so`` and the
stamp ``SOURCES`` last, so a build cut short is never taken for a current one. Does
nothing when DIR already holds a build of these sources. Needs a C compiler and Python's
headers; ``make setup`` runs it and goes on without it (the model then runs from source).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from monitor.model import _native  # noqa: E402

PACKAGE = ROOT / "monitor" / "model"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", type=Path, default=_native.default_dir(PACKAGE))
    ap.add_argument("--force", action="store_true", help="rebuild even if current")
    args = ap.parse_args(argv)
    dest: Path = args.dest.resolve()
    digest = _native.sources_digest(PACKAGE)
    stamp = dest / "SOURCES"
    if not args.force and stamp.is_file() and stamp.read_text().strip() == digest:
        print(f"compile_model: {dest} is current")
        return 0
    suffix = str(sysconfig.get_config_var("EXT_SUFFIX"))
    with tempfile.TemporaryDirectory(prefix="compile-model-") as tmp:
        work = Path(tmp)
        (work / "monitor" / "model").mkdir(parents=True)
        (work / "monitor" / "__init__.py").write_text("")
        for src in PACKAGE.glob("*.py"):
            shutil.copy2(src, work / "monitor" / "model" / src.name)
        files = [f"monitor/model/{name}.py" for name in _native.COMPILED]
        done = subprocess.run(
            [sys.executable, "-m", "mypyc", *files],
            cwd=work,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
            print(f"compile_model: mypyc failed (exit {done.returncode})", file=sys.stderr)
            return 1
        modules = sorted((work / "monitor" / "model").glob(f"*{suffix}"))
        libs = sorted(work.glob(f"*__mypyc{suffix}"))
        if len(modules) != len(_native.COMPILED) or len(libs) != 1:
            print(
                f"compile_model: expected {len(_native.COMPILED)} modules and one shared "
                f"library, got {[m.name for m in modules]} and {[x.name for x in libs]}",
                file=sys.stderr,
            )
            return 1
        # A staging directory of this run's own (two runs at once -- `make setup` twice
        # -- each install whole), renamed into place.
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=dest.name + ".new-", dir=dest.parent))
        try:
            staging.chmod(0o755)  # mkdtemp's is 0700: the image's runtime user reads it
            (staging / "model").mkdir()
            (staging / "lib").mkdir()
            for m in modules:
                shutil.move(str(m), staging / "model" / m.name)
            shutil.move(str(libs[0]), staging / "lib" / libs[0].name)
            (staging / "SOURCES").write_text(digest + "\n")
            shutil.rmtree(dest, ignore_errors=True)
            staging.rename(dest)
        except OSError:  # e.g. another run installed its build between the last two lines
            shutil.rmtree(staging, ignore_errors=True)
            if not (stamp.is_file() and stamp.read_text().strip() == digest):
                raise
            print(f"compile_model: {dest} is current (built by another run meanwhile)")
            return 0
    print(f"compile_model: {len(modules)} modules compiled into {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
