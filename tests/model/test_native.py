"""The model compiled by mypyc is the model: same findings, same states, same checkpoints.

``make setup`` compiles the model's modules (``scripts/compile_model.py``,
:mod:`monitor.model._native`) and every test of this suite then runs the compiled build
-- the first test here says so, and fails if the build is missing or stale. Here the
source is run beside it, in a subprocess with ``MONITOR_MODEL_NATIVE=off``: every scenario
of ``tests/data`` (events and round records, in micro-batches) and a synthetic fleet with
faults give the same findings, byte for byte, and the same partition states; a bucket
pickled by either loads in the other; a build of other sources is never loaded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

import monitor.model
from monitor.dev.rounds import fold
from monitor.dev.synth import generate
from monitor.model import _native, partition
from tests.model.test_round_step import _apply
from tests.model.test_rounds import _scenario_events
from tests.scenarios import SCENARIOS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "monitor" / "model"


def _source(code: str, *args: str) -> str:
    """Run ``code`` on the model's source (a subprocess, the compiled build turned off)."""
    env = {**os.environ, _native.ENV: "off"}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_tests_run_the_compiled_model() -> None:
    assert monitor.model.NATIVE is not None, monitor.model.NATIVE_NOTE
    suffix = str(sysconfig.get_config_var("EXT_SUFFIX"))
    assert partition.__file__ is not None and partition.__file__.endswith(suffix)
    assert "from source" in _source("import monitor.model as m; print(m.NATIVE_NOTE)")


def findings_and_states() -> dict[str, Any]:
    """Every scenario, as events and as round records, and a synthetic fleet with stalls
    and elections, applied in micro-batches: each partition's findings (JSON) and its
    state after the last batch and a tick (repr, field by field)."""
    out: dict[str, Any] = {}
    streams = [(sc.name, _scenario_events(sc), sc.config) for sc in SCENARIOS]
    fleet = list(generate(300, 40, fault_rate=0.05, seed=7))
    streams.append(("synth", fleet, {}))
    for name, events, config in streams:
        for form, stream in (
            ("events", events),
            ("rounds", fold(e for e in events if isinstance(e, dict))),
        ):
            lines = [e if isinstance(e, bytes) else json.dumps(e).encode() for e in stream]
            found, states, _ = _apply(lines, config, whole=True)
            out[f"{name}/{form}"] = {
                "findings": {"/".join(map(str, k)): v for k, v in sorted(found.items(), key=str)},
                "states": {"/".join(map(str, k)): repr(s) for k, s in sorted(states.items())},
            }
    return out


def test_compiled_and_source_find_the_same() -> None:
    compiled = findings_and_states()
    source = json.loads(
        _source(
            "import json; from tests.model.test_native import findings_and_states as f; "
            "print(json.dumps(f()))"
        )
    )
    assert compiled.keys() == source.keys()
    for k in compiled:
        assert compiled[k]["findings"] == source[k]["findings"], k
        assert compiled[k]["states"] == source[k]["states"], k
    found = sum(len(v) for r in compiled.values() for v in r["findings"].values())
    assert found > 1000, found  # the comparison compares something


def _bucket_blob(path: str) -> None:
    """A bucket of the synthetic fleet (elections being judged, open conditions, steady
    partitions), pickled as the Spark job stores it, written to ``path``."""
    from monitor.contract.events import parse_event, to_model
    from monitor.model import ClusterModel
    from streaming import operator as op

    model = ClusterModel()
    for d in generate(300, 40, fault_rate=0.05, seed=7, form="rounds"):
        model.apply(to_model(parse_event(json.dumps(d).encode())))
    Path(path).write_bytes(op.dumps(op.Bucket(model)))


def _bucket_view(path: str) -> str:
    """What a stored bucket holds, in words: every partition's, topic's and broker's
    state, and the encoding's fingerprint."""
    from streaming import operator as op

    m = op.loads(Path(path).read_bytes()).model
    parts = {str(k): repr(v) for k, v in sorted(m.partitions.items())}
    return json.dumps(
        [
            op.state_fingerprint(),
            parts,
            repr(sorted(m.topics.items())),
            repr(sorted(m.brokers.items())),
        ]
    )


def test_a_bucket_stored_by_either_loads_in_the_other(tmp_path: Path) -> None:
    mine, theirs = tmp_path / "compiled.bin", tmp_path / "source.bin"
    _bucket_blob(str(mine))
    _source(
        "import sys; from tests.model.test_native import _bucket_blob; _bucket_blob(sys.argv[1])",
        str(theirs),
    )
    here = _bucket_view(str(mine))
    assert here == _bucket_view(str(theirs))  # the source's bucket, read here
    view = (
        "import sys; from tests.model.test_native import _bucket_view as v; print(v(sys.argv[1]))"
    )
    assert _source(view, str(mine)).strip() == here  # ours, read by the source
    assert "ElectionCheck(" in here and "OpenCondition(" in here  # not only steady states


def test_a_build_of_other_sources_is_not_loaded(tmp_path: Path) -> None:
    """An edited model file: the default build is left aside (the source runs); a build
    named by MONITOR_MODEL_NATIVE is refused by name."""
    pkg = _checkout_copy(tmp_path)
    built = _native.default_dir(pkg)
    built.mkdir(parents=True)
    (built / "SOURCES").write_text(_native.sources_digest(pkg) + "\n")
    assert _native.find(pkg, {}) == (built, f"the model runs compiled (mypyc), from {built}")
    with (pkg / "partition.py").open("a") as fh:
        fh.write("# edited\n")
    where, why = _native.find(pkg, {})
    assert where is None and "(stale)" in why and "runs from source" in why
    with pytest.raises(ImportError, match=r"stale.*compile_model\.py"):
        _native.find(pkg, {_native.ENV: str(built)})
    with pytest.raises(ImportError, match="no compiled model"):
        _native.find(pkg, {_native.ENV: str(tmp_path / "nowhere")})
    assert _native.find(pkg, {_native.ENV: "off"})[0] is None


def _checkout_copy(tmp_path: Path) -> Path:
    """The model's sources in a checkout of their own under ``tmp_path``: its package dir."""
    pkg = tmp_path / "repo" / "monitor" / "model"
    shutil.copytree(PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "repo" / "pyproject.toml").write_text("")
    return pkg


def test_where_no_build_applies_the_source_runs_and_says_why(tmp_path: Path) -> None:
    """A package read from a --py-files zip runs the source whatever the setting names (no
    C extension loads from a zip); an installed package without a build says how to use
    one, not `make setup`."""
    built = tmp_path / "built"
    (built / "model").mkdir(parents=True)
    (built / "SOURCES").write_text("x\n")
    zipped = tmp_path / "monitor-py.zip" / "monitor" / "model"
    for env in ({}, {_native.ENV: str(built)}, {_native.ENV: "off"}):
        where, why = _native.find(zipped, env)
        assert where is None and why == (
            f"the model runs from source: its package is read from {zipped}"
        )
    installed = tmp_path / "site-packages" / "monitor" / "model"
    shutil.copytree(PACKAGE, installed, ignore=shutil.ignore_patterns("__pycache__"))
    where, why = _native.find(installed, {})
    assert where is None and "an installed package" in why and "make setup" not in why


def test_compiled_modules_beside_the_sources_are_refused(tmp_path: Path) -> None:
    """mypyc run in place leaves modules Python imports before the .py files, whatever
    MONITOR_MODEL_NATIVE says: refused by name, even with the source asked for."""
    pkg = _checkout_copy(tmp_path)
    stray = pkg / f"partition{sysconfig.get_config_var('EXT_SUFFIX')}"
    stray.write_bytes(b"")
    for env in ({}, {_native.ENV: "off"}):
        with pytest.raises(ImportError, match=rf"beside the model's sources.*{stray.name}"):
            _native.find(pkg, env)
    stray.unlink()
    assert _native.find(pkg, {_native.ENV: "off"})[0] is None


def _stamp_objects(path: str) -> str:
    """How many distinct values, and objects, the stamps and last truncations of a stored
    bucket's steady replicas are once read back (the packed ones: ``operator.flatten``)."""
    from streaming import operator as op

    parts = op.loads(Path(path).read_bytes()).model.partitions.values()
    steady = [ps for ps in parts if ps is not None and not ps.open and ps.election is None]
    replicas = [rs for ps in steady for rs in ps.replica_states.values()]
    stamps = [ps.last_seen for ps in steady] + [rs.observed_at for rs in replicas]
    truncations = [rs.last_truncation for rs in replicas]
    return " ".join(
        str(n)
        for n in (
            len(set(stamps)),
            len({id(s) for s in stamps}),
            len(set(truncations)),
            len({id(t) for t in truncations}),
        )
    )


def test_the_source_model_reads_one_object_per_stamp_value(tmp_path: Path) -> None:
    """Read back by the source, a bucket's stamps are one object per value (the memory a
    worker holds per partition: ``streaming.operator._unpack``); compiled, the states hold
    them unboxed (``tests/streaming/test_operator_state.py`` checks the rest there)."""
    blob = tmp_path / "bucket.bin"
    _bucket_blob(str(blob))
    code = (
        "import sys; from tests.model.test_native import _stamp_objects as s; print(s(sys.argv[1]))"
    )
    values, objects, truncations, truncation_objects = _source(code, str(blob)).split()
    assert int(values) > 2 and values == objects
    assert truncations == truncation_objects
