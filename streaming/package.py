"""Ship the code to a real cluster: a zip of ``monitor`` and ``streaming`` for ``--py-files``.

Executors import ``monitor`` (the model) and ``streaming`` (the operator) to run the stateful
processor. On the local machine the venv has both installed; on a cluster either install
the wheel on every node, or pass this zip::

    python -m streaming.package dist/monitor-py.zip
    spark-submit --py-files dist/monitor-py.zip ... streaming/cli.py ...

The third-party packages (pydantic, pandas, pyarrow, protobuf) must be in the executors'
Python (``spark.pyspark.python``); they are not zipped (pydantic has native code).
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

PACKAGES = ("monitor", "streaming")
#: Never shipped to executors: the development package (lab, demo, soak, simulations)
#: runs on a developer's machine only, and the runtime never imports it.
LEFT_OUT = ("monitor/dev",)


def build_pyfiles_zip(dest: str | Path) -> Path:
    root = Path(__file__).resolve().parents[1]
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for pkg in PACKAGES:
            for path in sorted((root / pkg).rglob("*")):
                if "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
                    continue
                rel = path.relative_to(root).as_posix()
                if any(rel == x or rel.startswith(x + "/") for x in LEFT_OUT):
                    continue
                if path.is_file():
                    zf.write(path, path.relative_to(root))
    return dest


if __name__ == "__main__":
    out = build_pyfiles_zip(sys.argv[1] if len(sys.argv) > 1 else "dist/monitor-py.zip")
    print(out)
