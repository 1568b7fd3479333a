"""`python -m bench`: list the benchmarks (run one with `python -m bench.<name>`)."""

import pkgutil
from pathlib import Path

for mod in sorted(pkgutil.iter_modules([str(Path(__file__).parent)])):
    if not mod.name.startswith("_"):
        print(f"python -m bench.{mod.name}")
