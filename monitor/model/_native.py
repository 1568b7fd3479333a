"""The model compiled to C with mypyc, where a build of these very sources is at hand.

The model is plain, fully typed Python; mypyc (mypy's compiler) turns its modules into C
extension modules with the same behaviour -- native classes for the states, direct calls,
unboxed integers -- and runs ~2x faster (``bench.model_bench --compare-source``: 2.1x the
events/s; the Spark operator's Python side 0.69x the CPU a partition-round,
``bench.operator_bench --compare-source``; docs/benchmarks.md). Nothing in the
source changes for it, and the source stays what a reader reads and what runs wherever no
build is there.

``scripts/compile_model.py`` (run by ``make setup``) builds the modules of :data:`COMPILED`
into ``.cache/native-model/`` beside the checkout, with a stamp of the sources it compiled
(:func:`sources_digest`). ``monitor/model/__init__.py`` asks :func:`find` which build to
load before it imports anything else of the package, and puts it first on the package's
path. A build of other sources (a model file edited since) is never loaded: a stale
compiled module would shadow the edit.

``MONITOR_MODEL_NATIVE``: unset, the default build if it is there and current, else the
source; ``off``, always the source (the equivalence tests run the source this way); a
directory, that build -- and an import error if it is missing or stale, since it was asked
for by name. What was chosen, and why, is ``monitor.model.NATIVE_NOTE``: the job's driver
logs its own; executors choose theirs the same way, from their environment and install.

Not compiled: ``cluster`` (its ``ClusterModel`` is pickled through its ``__dict__``) and
``config`` (a frozen settings object shipped to the executors), both cold; this module and
the package's ``__init__``, which run before the build is chosen.
"""

from __future__ import annotations

import hashlib
import sysconfig
from collections.abc import Mapping
from pathlib import Path

#: The model's modules mypyc compiles (the hot path of a partition-round, and its states).
COMPILED = (
    "_emit",
    "batch",
    "election",
    "events",
    "findings",
    "order",
    "partition",
    "rules",
    "stamps",
    "state",
)
#: The environment variable that chooses (see the module's docstring).
ENV = "MONITOR_MODEL_NATIVE"
_OFF = ("off", "0", "no", "false", "source")


def sources_digest(package_dir: Path) -> str:
    """What a build is of: the compiled modules' sources and the interpreter's extension
    suffix (an ABI: ``.cpython-311-x86_64-linux-gnu.so``)."""
    h = hashlib.sha256(str(sysconfig.get_config_var("EXT_SUFFIX")).encode())
    for name in COMPILED:
        h.update(f"\0{name}\0".encode())
        h.update((package_dir / f"{name}.py").read_bytes())
    return h.hexdigest()


def default_dir(package_dir: Path) -> Path:
    """Where ``scripts/compile_model.py`` builds by default: ``.cache/native-model`` at the
    root of the checkout holding ``package_dir``."""
    return package_dir.parents[1] / ".cache" / "native-model"


def find(package_dir: Path, env: Mapping[str, str]) -> tuple[Path | None, str]:
    """The build to load (its directory: ``model/`` holds the modules, ``lib/`` mypyc's
    shared library), or None for the source; and why, in a sentence.

    Refuses (``ImportError``) compiled modules left beside the sources (mypyc run in
    place): Python would import them before the ``.py`` files, whatever the setting says,
    and run them stale once a source is edited."""
    if not package_dir.is_dir():
        # Read from a zip (``--py-files``): Python loads no C extension from one, and
        # nothing tells which sources a build would have to match. Either runs the same.
        return None, f"the model runs from source: its package is read from {package_dir}"
    suffix = str(sysconfig.get_config_var("EXT_SUFFIX"))
    in_place = sorted(p.name for p in package_dir.glob(f"*{suffix}"))
    if in_place:
        raise ImportError(
            f"compiled modules beside the model's sources in {package_dir}: "
            f"{', '.join(in_place)} (mypyc run in place?); Python would import them instead "
            "of the .py files -- remove them (builds go to .cache/native-model: "
            "scripts/compile_model.py)"
        )
    setting = env.get(ENV, "").strip()
    if setting.lower() in _OFF:
        return None, f"the model runs from source ({ENV}={setting})"
    where = Path(setting) if setting else default_dir(package_dir)
    stamp = where / "SOURCES"
    if not stamp.is_file():
        why = f"no compiled model at {where}"
    else:
        try:
            current = sources_digest(package_dir)
        except OSError:  # a source unreadable: no build can be known to match
            current = ""
        if stamp.read_text().strip() == current:
            return where, f"the model runs compiled (mypyc), from {where}"
        why = (
            f"the compiled model at {where} was built from other sources than those in "
            f"{package_dir}, or for another Python (stale)"
        )
    if setting:
        raise ImportError(
            f"{ENV}={setting}: {why}; build it with `python scripts/compile_model.py "
            f"--dest {setting}`, or unset {ENV} to run the source"
        )
    if not (package_dir.parents[1] / "pyproject.toml").is_file():  # installed, not a checkout
        return None, (
            f"the model runs from source (an installed package; {ENV}=DIR runs a build "
            "made with scripts/compile_model.py --dest DIR)"
        )
    return None, f"{why}: the model runs from source (`make setup` compiles it)"
