"""The store forgets, off the batch's path, on local folders and through pyarrow's file
systems alike; and a checkpoint is paired with its store (issue 20).

Findings were never compacted (one folder per batch, forever, every one loaded by the
exporter at start), a store on a URI was never compacted at all, compaction ran inside the
batch (a DuckDB or disk error failed the batch, and its replay failed again), and a new
checkpoint on an old store restarted batch ids at 0 -- the old rows won, silently.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench._synthetic_store import write_store
from monitor.contract.store import STORE_PAIR, finding_store_rows
from monitor.query.store import StoreReader
from streaming.store import Compactor, write_findings_locally
from streaming.storefs import CHECKPOINT_PAIR, StorePairError, pair

DAY_MS = 86_400_000
NOW_MS = 1_800_000_000_000


@dataclass
class _Batch:
    batch_id: int


def _finding(
    fid: str, kind: str, state: str, at: int, opened_at: int, topic: str = "t"
) -> dict[str, Any]:
    return {
        "id": fid, "kind": kind, "state": state, "severity": "critical", "cluster": "c",
        "topic": topic, "partition": 0, "broker": None, "at": at, "opened_at": opened_at,
        "details": {},
    }  # fmt: skip


def _findings_store(root: Path) -> None:
    """Six batches of findings: old and recent, one-off and conditions, and one id twice."""
    old, recent = NOW_MS - 40 * DAY_MS, NOW_MS - DAY_MS
    batches = [
        [_finding("old-event", "unclean_election", "event", old, old)],
        [_finding("old-open", "offline", "open", old, old, "a"),
         _finding("still-open", "under_min_isr", "open", old, old, "b")],
        [_finding("old-resolved", "offline", "resolved", old + 5, old, "a")],
        [_finding("new-event", "committed_data_loss", "event", recent, recent)],
        [_finding("new-event", "committed_data_loss", "event", recent, recent)],  # replayed
        [_finding("newest", "offline", "open", recent + 9, recent + 9, "c")],
    ]  # fmt: skip
    for b, fs in enumerate(batches):
        detected = fs[0]["at"] + 1_000
        write_findings_locally(root, b, finding_store_rows(fs, b, detected))


def _ids(root: Path) -> set[str]:
    return {f["id"] for f in StoreReader(root).query("SELECT id FROM findings")}


@pytest.mark.parametrize("uri", [False, True], ids=["folder", "file-uri"])
def test_findings_age_out_except_open_conditions(tmp_path: Path, uri: bool) -> None:
    root = tmp_path / "store"
    _findings_store(root)
    assert _ids(root) == {
        "old-event", "old-open", "still-open", "old-resolved", "new-event", "newest"
    }  # fmt: skip
    location = f"file://{root}" if uri else str(root)
    compactor = Compactor(location, every=5, clock=lambda: NOW_MS / 1000)
    compactor(_Batch(5))  # folds the committed batches 0-4; batch 5 is the current one
    compactor.wait()
    assert (compactor.compactions, compactor.errors) == (1, 0), compactor.last_error
    # Kept: the recent, and the open condition without a resolve, however old.
    assert _ids(root) == {"still-open", "new-event", "newest"}
    folders = sorted(p.name for p in (root / "findings").iterdir())
    assert folders == ["batch_id=4", "batch_id=5"]
    assert len(list((root / "findings" / "batch_id=4").glob("*.parquet"))) == 1
    row = StoreReader(root).query("SELECT * FROM findings WHERE id = 'still-open'")[0]
    assert row["detected_at"] == NOW_MS - 40 * DAY_MS + 1_000  # the detection time travels


def test_state_compaction_through_a_file_uri(tmp_path: Path) -> None:
    """A store on a URI is compacted through pyarrow's file systems (no object store
    server can run here; ``file://`` takes the same path as ``s3://`` would)."""
    store = write_store(tmp_path / "store", 2_000, phases=4)
    root = store.root
    before = {
        (r["topic"], r["partition"]): r["high_watermark"] for r in StoreReader(root).current()
    }
    old = time.time() - 7200
    for b in (0, 1):
        os.utime(root / "state" / f"batch_id={b}", (old, old))
    compactor = Compactor(f"file://{root}", every=4, history_s=3600)
    compactor(_Batch(4))
    compactor.wait()
    assert (compactor.compactions, compactor.errors) == (1, 0), compactor.last_error
    assert sorted(int(p.name.split("=")[1]) for p in (root / "state").iterdir()) == [2, 3]
    after = {(r["topic"], r["partition"]): r["high_watermark"] for r in StoreReader(root).current()}
    assert after == before
    assert json.loads((root / "snapshot" / "snapshot.json").read_text()) == {"upto_batch": 1}


def test_a_compaction_error_is_counted_and_never_reaches_the_batch(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _findings_store(root)
    (root / "findings" / "batch_id=2" / "part-00000.parquet").write_bytes(b"not parquet")
    compactor = Compactor(str(root), every=5, clock=lambda: NOW_MS / 1000)
    compactor(_Batch(5))  # returns at once: the work is on the compactor's thread
    compactor.wait()
    assert (compactor.compactions, compactor.errors) == (0, 1)
    assert compactor.last_error and "parquet" in compactor.last_error.lower()
    (root / "findings" / "batch_id=2" / "part-00000.parquet").unlink()
    compactor(_Batch(10))  # the next round tries again
    compactor.wait()
    assert (compactor.compactions, compactor.errors) == (1, 1), compactor.last_error
    compactor.stop()


def test_a_new_checkpoint_continues_after_the_stores_last_batch(tmp_path: Path) -> None:
    store, first, second = tmp_path / "store", tmp_path / "ck1", tmp_path / "ck2"
    assert pair(str(first), str(store)) == 0  # both new
    assert pair(str(first), str(store)) == 0  # the same pair again
    for b in range(8):
        (store / "state" / f"batch_id={b}").mkdir(parents=True)
    # A new checkpoint on that store: its batch 0 is the store's batch 8, so its rows win.
    assert pair(str(second), str(store)) == 8
    assert pair(str(second), str(store)) == 8
    record = json.loads((second / CHECKPOINT_PAIR).read_text())
    assert json.loads((store / STORE_PAIR).read_text()) == {
        "pair": record["pair"], "since": record["since"]
    }  # fmt: skip
    assert record["since"] > 0  # a new checkpoint: what it reads first is history
    # The first checkpoint's store now belongs to the second: refused, by name.
    with pytest.raises(StorePairError, match="paired with another checkpoint"):
        pair(str(first), str(store))


def test_a_checkpoint_from_before_the_pairing_is_paired_as_it_is(tmp_path: Path) -> None:
    store, ck = tmp_path / "store", tmp_path / "ck"
    (ck / "offsets").mkdir(parents=True)
    (ck / "offsets" / "41").write_text("v1")  # Spark's offset log of a running job
    (store / "state" / "batch_id=41").mkdir(parents=True)
    assert pair(str(ck), str(store)) == 0
    other = tmp_path / "other"
    (other / "offsets").mkdir(parents=True)
    (other / "offsets" / "3").write_text("v1")
    with pytest.raises(StorePairError, match="has batches of its own"):
        pair(str(other), str(store))
