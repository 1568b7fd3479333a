"""A checkpoint resumes only with the bucket layout its state was keyed by."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.job import LAYOUT_FILE, LayoutError, check_layout
from streaming.operator import state_fingerprint

ROOT = Path(__file__).resolve().parents[2]


def test_a_new_checkpoint_records_its_layout_and_resumes_with_it(tmp_path: Path) -> None:
    ck = tmp_path / "checkpoint"
    check_layout(str(ck), 16)
    assert json.loads((ck / LAYOUT_FILE).read_text())["buckets"] == 16
    check_layout(str(ck), 16)  # the same layout: resumes


def test_other_buckets_are_refused_naming_both(tmp_path: Path) -> None:
    check_layout(str(tmp_path), 16)
    with pytest.raises(LayoutError, match=r"16 buckets .* not 32"):
        check_layout(str(tmp_path), 32)


def test_a_checkpoint_of_the_earlier_layout_is_refused(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("v1\n")
    with pytest.raises(LayoutError, match="earlier version"):
        check_layout(str(tmp_path), 16)
    assert not (tmp_path / LAYOUT_FILE).exists()


def test_a_checkpoint_of_another_state_shape_is_refused(tmp_path: Path) -> None:
    """The model's state is pickled positionally: a job whose state classes have other
    fields must not read it (fields handed to the wrong names, or a failure mid-batch)."""
    check_layout(str(tmp_path), 16)
    record = json.loads((tmp_path / LAYOUT_FILE).read_text())
    assert record["state"] == state_fingerprint()
    (tmp_path / LAYOUT_FILE).write_text(json.dumps(record | {"state": "0123456789ab"}))
    with pytest.raises(LayoutError, match=r"model state of another shape \(state 0123456789ab"):
        check_layout(str(tmp_path), 16)
    # a record from before the state was recorded (issue 16 changed the state) is refused too
    (tmp_path / LAYOUT_FILE).write_text(json.dumps({"layout": record["layout"], "buckets": 16}))
    with pytest.raises(LayoutError, match="another version of the job"):
        check_layout(str(tmp_path), 16)


def test_the_fingerprint_follows_the_state_classes() -> None:
    """A stored class with one more field has another fingerprint (so the check above
    catches a model change); the same classes, the same one."""
    import dataclasses

    from monitor.model.state import ElectionCheck

    @dataclasses.dataclass
    class ElectionCheckWithMore(ElectionCheck):  # type: ignore[misc]
        more: int = 0

    ElectionCheckWithMore.__name__ = "ElectionCheck"
    assert state_fingerprint((ElectionCheck,)) == state_fingerprint((ElectionCheck,))
    assert state_fingerprint((ElectionCheckWithMore,)) != state_fingerprint((ElectionCheck,))


def test_a_damaged_record_is_named(tmp_path: Path) -> None:
    (tmp_path / LAYOUT_FILE).write_text("{not json")
    with pytest.raises(LayoutError, match=LAYOUT_FILE):
        check_layout(str(tmp_path), 16)


def test_uris_are_not_checked() -> None:
    check_layout("hdfs://namenode:8020/monitor/checkpoint", 16)  # no file system access


def test_monitor_stream_says_so_and_exits_2_before_starting_spark(tmp_path: Path) -> None:
    check_layout(str(tmp_path / "ck"), 16)
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "stream", "--checkpoint", str(tmp_path / "ck"),
         "--store", str(tmp_path / "store"), "--buckets", "8", "--bootstrap", "m:9092"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "holds state for 16 buckets" in proc.stderr and "not 8" in proc.stderr
    assert "Traceback" not in proc.stderr
