"""The store writer's files are private and its writes leave nothing half-done (issue 51).

* what the writer makes locally is 0700 (folders) / 0600 (files) whatever the umask --
  Spark's own files too, through the job's Hadoop setting (:data:`PRIVATE_SPARK_CONF`);
* a write that fails removes its ``_tmp-<uuid>`` and leaves the batch's previous folder as it
  was; a replace never leaves the batch missing; what a killed run left is removed at start
  (:func:`clear_temporaries`), and readers never read it meanwhile;
* a store path holding a quote is written and read (DuckDB's SQL gets it quoted).

The writer is driven directly (the findings write, the compactions, the pairing): no Spark,
except for the one test of Spark's own files, in a process of its own (its umask).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from bench._synthetic_store import write_store
from monitor.query.store import StoreReader, StoreSource
from streaming import store as store_mod
from streaming.store import (
    clear_temporaries,
    compact,
    compact_findings,
    exchange,
    write_findings_locally,
)
from streaming.storefs import PRIVATE_SPARK_CONF, Location, pair, private_dir, private_file

ROWS = [
    ("f-1", "under_min_isr", "open", "critical", "c1", "orders", 0, None, 1_000, 1_000,
     '{"isr":[1],"min_isr":2}', 1_700_000_000_000, 4 << 32),
    ("f-2", "stale_telemetry", "open", "warning", "c1", None, None, 3, 1_500, 1_500, "{}", None,
     None),
]  # fmt: skip


@pytest.fixture
def umask_000() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _not_private(root: Path) -> list[str]:
    """Every entry under ``root`` (itself included) that is not a 0700 folder or 0600 file."""
    entries = [(root, 0o700)]
    for folder, dirs, files in os.walk(root):
        entries += [(Path(folder) / d, 0o700) for d in dirs]
        entries += [(Path(folder) / f, 0o600) for f in files]
    bad = []
    for path, want in entries:
        mode = os.lstat(path).st_mode
        if stat.S_IMODE(mode) != want or stat.S_ISLNK(mode):
            bad.append(f"{path.relative_to(root.parent)} {stat.S_IMODE(mode):o}")
    return sorted(bad)


def _ids(store: Path) -> list[str]:
    """The ids of :data:`ROWS`' findings the reader sees (the synthetic store has its own)."""
    rows = StoreReader(store).query("SELECT id FROM findings WHERE id LIKE 'f-%' ORDER BY id")
    return [r["id"] for r in rows]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(("_tmp-", "_old-")))


# --- private whatever the umask ----------------------------------------------------------------


def test_a_store_written_under_umask_000_holds_only_0700_folders_and_0600_files(
    tmp_path: Path, umask_000: None
) -> None:
    store, checkpoint = tmp_path / "store", tmp_path / "checkpoint"
    # The state batches, as Spark writes them with the job's PRIVATE_SPARK_CONF (the last
    # test here): made by the synthetic store's writer, then set so.
    write_store(store, 300, phases=4)
    for folder, _, files in os.walk(store):
        os.chmod(folder, 0o700)
        for f in files:
            os.chmod(Path(folder) / f, 0o600)
    assert _not_private(store) == []
    # Everything else, by the store writer itself, under umask 000.
    pair(str(checkpoint), str(store))
    write_findings_locally(store, 0, ROWS)
    write_findings_locally(store, 0, ROWS[:1])  # a replayed batch: replaced
    write_findings_locally(store, 1, ROWS[1:])
    write_findings_locally(tmp_path / "new" / "store", 0, ROWS)  # a store it makes itself
    assert compact(str(store), 1) > 0  # the snapshot and its mark
    assert compact_findings(Location.of(str(store)), 1, 0) == 2  # a folded file
    assert (store / "snapshot" / "state.parquet").is_file()
    assert list((store / "findings").glob("batch_id=1/part-folded-*.parquet"))
    assert (store / "_monitor_pair.json").is_file()
    assert (checkpoint / "monitor-store.json").is_file()
    assert _not_private(store) == []
    assert _not_private(checkpoint) == []
    assert _not_private(tmp_path / "new") == []
    assert _ids(store) == ["f-1", "f-2"]


def test_private_dir_and_file_are_private_under_any_umask(tmp_path: Path) -> None:
    for mask in (0o000, 0o022, 0o277):  # 0o277 would take the owner's own write away
        old = os.umask(mask)
        try:
            folder = tmp_path / f"m{mask:o}" / "a" / "b"
            private_dir(folder)
            private_dir(folder)  # there already: nothing to do
            with private_file(folder / "f") as f:
                f.write(b"x")
        finally:
            os.umask(old)
        assert _not_private(tmp_path / f"m{mask:o}") == []
    with pytest.raises(FileExistsError):
        private_file(folder / "f")  # never an existing file (its mode is someone else's)


@pytest.mark.spark
def test_spark_writes_private_files_under_umask_000_with_the_job_setting(
    tmp_path: Path,
) -> None:
    """Hadoop's file systems ignore the process umask (files 0644, folders 0755 under umask
    077 as under 000); with the job's ``fs.permissions.umask-mode`` they are 0600/0700."""
    script = f"""
import os, sys
os.umask(0)
from streaming.session import build_session
out = sys.argv[1]
spark = build_session(master="local[1]", conf={PRIVATE_SPARK_CONF!r})
spark.range(5).write.mode("overwrite").parquet(out + "/store/state/batch_id=0")
query = (
    spark.readStream.format("rate").option("rowsPerSecond", 5).load().writeStream
    .format("parquet").option("path", out + "/sink")
    .option("checkpointLocation", out + "/checkpoint").trigger(availableNow=True).start()
)
query.awaitTermination()
spark.stop()
"""
    out = tmp_path / "spark"
    os.mkdir(out, 0o700)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list((out / "checkpoint").glob("offsets/*")), "the query wrote no checkpoint"
    assert list((out / "store" / "state" / "batch_id=0").glob("*.parquet"))
    assert _not_private(out) == []


# --- nothing half-done ---------------------------------------------------------------------------


def _fail_mid_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Parquet write raises after some bytes are out (a full disk, say)."""

    def broken(table: Any, where: Any, *args: Any, **kwargs: Any) -> None:
        where.write(b"PAR1 half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", broken)


def test_a_findings_write_failing_mid_write_leaves_no_tmp_and_the_old_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_findings_locally(tmp_path, 7, ROWS)
    with monkeypatch.context() as m:
        _fail_mid_write(m)
        with pytest.raises(OSError, match="No space"):
            write_findings_locally(tmp_path, 7, ROWS[:1])
        with pytest.raises(OSError, match="No space"):
            write_findings_locally(tmp_path, 8, ROWS[:1])  # a new batch
    assert sorted(p.name for p in (tmp_path / "findings").iterdir()) == ["batch_id=7"]
    assert _ids(tmp_path) == ["f-1", "f-2"]


def test_a_findings_replace_failing_at_its_rename_leaves_no_tmp_and_the_old_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_findings_locally(tmp_path, 7, ROWS)

    def refused(a: Path, b: Path) -> bool:
        raise PermissionError(13, "Permission denied", str(a))

    monkeypatch.setattr(store_mod, "exchange", refused)
    with pytest.raises(PermissionError):
        write_findings_locally(tmp_path, 7, ROWS[:1])
    assert sorted(p.name for p in (tmp_path / "findings").iterdir()) == ["batch_id=7"]
    assert _ids(tmp_path) == ["f-1", "f-2"]


def test_without_a_swap_the_old_folder_goes_aside_and_comes_back_if_the_rename_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where folders cannot be swapped in one step: ``_old-<uuid>``, then the new folder in
    place, then the old removed -- or, when the new one cannot be renamed, put back."""
    monkeypatch.setattr(store_mod, "exchange", lambda a, b: False)
    write_findings_locally(tmp_path, 7, ROWS)
    write_findings_locally(tmp_path, 7, ROWS[:1])
    assert _leftovers(tmp_path / "findings") == []
    assert _ids(tmp_path) == ["f-1"]

    rename = Path.rename

    def new_one_refused(self: Path, target: Any) -> Any:
        if self.name.startswith("_tmp-"):
            raise OSError(5, "Input/output error", str(self))
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", new_one_refused)
    with pytest.raises(OSError, match="Input/output"):
        write_findings_locally(tmp_path, 7, ROWS)
    assert sorted(p.name for p in (tmp_path / "findings").iterdir()) == ["batch_id=7"]
    assert _ids(tmp_path) == ["f-1"]


_POLL = """
import os, sys
path, stop = sys.argv[1], sys.argv[2]
probes = missing = 0
print("ready", flush=True)
while not os.path.exists(stop):
    probes += 1
    missing += not os.path.isfile(path)
print(probes, missing, flush=True)
"""


def test_a_replaced_batch_is_never_missing_for_a_reader(tmp_path: Path) -> None:
    """Replacing a batch folder swaps it (``renameat2``): a reader polling it (a process of
    its own) sees the old one or the new one, never none (rmtree-then-rename left it
    missing)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    if not exchange(a, b):
        pytest.skip("this system or file system cannot swap folders in one step")
    write_findings_locally(tmp_path, 7, ROWS)
    final = tmp_path / "findings" / "batch_id=7" / "part-00000.parquet"
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", _POLL, str(final), str(stop)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline() == "ready\n"
        for n in range(200):
            write_findings_locally(tmp_path, 7, ROWS[n % 2 :])
    finally:
        stop.touch()
        out, _ = reader.communicate(timeout=30)
    probes, missing = map(int, out.split())
    assert probes > 1000
    assert missing == 0, f"batch_id=7 missing in {missing} of {probes} reads"
    assert _leftovers(tmp_path / "findings") == []


def test_compactions_failing_mid_write_leave_no_temporaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = write_store(tmp_path / "store", 300, phases=4).root
    write_findings_locally(store, 0, ROWS[:1])
    write_findings_locally(store, 1, ROWS[1:])
    before = {(r["topic"], r["partition"]): r["updated_at"] for r in StoreReader(store).current()}
    files = sorted(str(p.relative_to(store)) for p in store.rglob("*"))

    replace = Path.replace

    def refused(self: Path, target: Any) -> Any:
        if Path(target).name == "state.parquet":
            raise OSError(5, "Input/output error", str(self))
        return replace(self, target)

    with monkeypatch.context() as m:
        m.setattr(Path, "replace", refused)
        with pytest.raises(OSError, match="Input/output"):
            compact(str(store), 1)
    with monkeypatch.context() as m:
        _fail_mid_write(m)
        with pytest.raises(OSError, match="No space"):
            compact_findings(Location.of(str(store)), 1, 0)
    now = sorted(str(p.relative_to(store)) for p in store.rglob("*"))
    assert [f for f in now if f != "snapshot"] == files  # (the snapshot's folder, empty)
    assert list((store / "snapshot").iterdir()) == []
    after = {(r["topic"], r["partition"]): r["updated_at"] for r in StoreReader(store).current()}
    assert after == before
    assert _ids(store) == ["f-1", "f-2"]


def test_a_killed_runs_temporaries_are_never_read_and_are_removed_at_start(
    tmp_path: Path,
) -> None:
    store = write_store(tmp_path / "store", 300, phases=4, compact_upto=1).root
    write_findings_locally(store, 3, ROWS[:1])
    # What a job killed mid-write leaves: a findings folder being written, an old folder
    # being removed, a folded file, a snapshot and the JSON records on their way.
    for name in ("_tmp-0123abcd", "_old-4567cdef"):
        folder = store / "findings" / name
        folder.mkdir()
        write_findings_locally(tmp_path / "other", 3, ROWS[1:])
        os.replace(tmp_path / "other" / "findings" / "batch_id=3" / "part-00000.parquet",
                   folder / "part-00000.parquet")  # fmt: skip
    (store / "findings" / "_tmp-part-folded-89ab.parquet").write_bytes(b"PAR1")
    (store / "snapshot" / "state.parquet.tmp").write_bytes(b"PAR1")  # an older version's
    (store / "snapshot" / "state.parquet.tmp-1a2b3c4d").write_bytes(b"PAR1")
    (store / "snapshot" / "_tmp-5e6f").mkdir()
    (store / "snapshot" / "snapshot.json.tmp-9f8e7d6c").write_text("{")
    (store / "_monitor_pair.json.tmp-0a1b2c3d").write_text("{")
    kept = {p for p in store.rglob("*") if not any(s in str(p) for s in ("_tmp-", "_old-", ".tmp"))}

    assert _ids(store) == ["f-1"]  # the readers glob batch_id=*: none of it is read
    assert StoreReader(store).last_findings_batch() == 3
    assert len(StoreSource(store).partitions()) == 300

    assert clear_temporaries(str(store)) == 8
    assert set(store.rglob("*")) == kept
    assert clear_temporaries(str(store)) == 0
    assert _ids(store) == ["f-1"]
    assert json.loads((store / "snapshot" / "snapshot.json").read_text()) == {"upto_batch": 1}
    assert clear_temporaries(str(tmp_path / "no store yet")) == 0


# --- a quote in the store's path ---------------------------------------------------------------


def test_a_store_path_with_a_quote_is_written_and_read(tmp_path: Path) -> None:
    store = tmp_path / "o'brien store"
    write_store(store, 300, phases=4)
    write_findings_locally(store, 0, ROWS[:1])
    write_findings_locally(store, 1, ROWS[1:])
    assert compact(str(store), 1) > 0  # the writer's own SQL over the store
    assert (store / "snapshot" / "state.parquet").is_file()
    assert not list((store / "state").glob("batch_id=1"))
    source = StoreSource(store)
    assert len(source.partitions()) == 300
    assert source.summary().partitions == 300
    assert _ids(store) == ["f-1", "f-2"]
    assert StoreReader(store, cluster="o'brien").query("SELECT count(*) AS n FROM cur") == [
        {"n": 0}
    ]
