"""The job's store compaction hook: old batches fold into the snapshot, recent ones stay as
history, and the latest state of every partition is unchanged."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from bench._synthetic_store import write_store
from monitor.query.store import StoreReader
from streaming.store import Compactor


@dataclass
class _Batch:
    batch_id: int


def _folders(root: Path) -> list[int]:
    return sorted(int(p.name.split("=")[1]) for p in root.glob("state/batch_id=*"))


def test_compactor_folds_only_old_committed_batches(tmp_path: Path) -> None:
    store = write_store(tmp_path / "store", 2_000, phases=4)
    root = store.root
    before = {(r["topic"], r["partition"]): r for r in StoreReader(root).current()}
    assert _folders(root) == [0, 1, 2, 3]
    old = time.time() - 7200
    for b in (0, 1):  # two hours old; 2 and 3 are recent
        os.utime(root / "state" / f"batch_id={b}", (old, old))

    hook = Compactor(str(root), every=4, history_s=3600)
    hook(_Batch(3))  # not a multiple of 4: nothing
    hook.wait()
    assert hook.compactions == 0 and _folders(root) == [0, 1, 2, 3]
    hook(_Batch(4))
    hook.wait()
    assert hook.compactions == 1
    assert _folders(root) == [2, 3]  # recent history kept for explain
    after = {(r["topic"], r["partition"]): r for r in StoreReader(root).current()}
    assert after.keys() == before.keys()
    for key, row in before.items():
        assert after[key]["high_watermark"] == row["high_watermark"], key
        assert after[key]["updated_at"] == row["updated_at"], key
    (topic, part), row = next(iter(before.items()))
    assert len(StoreReader(root, row["cluster"]).history(topic, part)) >= 2  # snapshot + recent


def test_a_tombstone_hides_a_partition_and_compaction_drops_it(tmp_path: Path) -> None:
    """A deleted topic's partitions get a tombstone row (``deleted_at``): readers skip them
    at once, and compaction leaves them out of the snapshot -- history and all."""
    from streaming.store import compact

    store = write_store(tmp_path / "store", 300, phases=2)
    root = store.root
    reader = StoreReader(root)
    before = reader.current()
    gone = {(r["topic"], r["partition"]) for r in before[:7]}
    n = len(list((root / "state").glob("batch_id=*")))
    batch = root / "state" / f"batch_id={n}"  # the newest batch
    batch.mkdir()
    where = " OR ".join(f"(topic = '{t}' AND partition = {p})" for t, p in gone)
    reader.con.execute(
        f"COPY (SELECT * EXCLUDE (batch_id) REPLACE (updated_at + 1 AS deleted_at) FROM cur "
        f"WHERE {where}) TO '{batch}/part-0.parquet' (FORMAT parquet)"
    )
    after = StoreReader(root).current()
    assert {(r["topic"], r["partition"]) for r in after} == {
        (r["topic"], r["partition"]) for r in before
    } - gone
    assert compact(str(root), n) == len(before) - len(gone)
    snap = StoreReader(root).query("SELECT topic, partition FROM rows")
    assert not {(r["topic"], r["partition"]) for r in snap} & gone
