"""The state store, written: the job's findings write, and compaction.

The layout, the row schemas and which row is newest are in :mod:`monitor.contract.store`;
the one reader is :mod:`monitor.query.store`. The job writes the state rows with Spark
(``Sinks`` in ``streaming/job.py``) and, for a local store, the findings with pyarrow from
the driver (:func:`write_findings_locally`); :class:`Compactor` folds old batches into the
snapshot.

Why Parquet + DuckDB: the job must not wait on a database; appending a few MB of columnar
files per batch costs the job almost nothing, works on any Hadoop file system (HDFS, S3)
and needs no server. DuckDB reads a partition's history or the latest state of every
partition from those files in milliseconds, in-process, from the runbook CLI.

Writes leave nothing half-done where readers look: each is made under a temporary name
(``_tmp-<uuid>``, ``*.tmp-<id>``) that no reader globs (they read ``batch_id=<n>/*.parquet``
and ``snapshot/state.parquet`` only), then renamed into place; a write that fails removes
its temporary, and what a killed job left is removed when the next one starts
(:func:`clear_temporaries`). Everything written locally is private (0700 folders, 0600
files, whatever the umask: :mod:`streaming.storefs`).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import posixpath
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from monitor.contract.store import (
    FINDING_COLUMNS,
    FINDING_IDENTITY,
    FINDINGS,
    FINDINGS_IN_ORDER,
    LATER_FINDING_COLUMNS,
    NEWEST_FIRST,
    SNAPSHOT_FILE,
    SNAPSHOT_MARK,
    STATE,
)
from monitor.query.store import connect, sources_sql
from streaming.storefs import FILE_MODE, Location, is_uri, private_dir, private_file

log = logging.getLogger("streaming.store")


#: The prefixes of the store writer's temporaries: a folder being written, an old folder
#: being removed. Readers never look at them (they glob ``batch_id=*``).
TEMPORARY, OLD = "_tmp-", "_old-"


def is_local(location: str) -> bool:
    """A folder on this machine, not an ``hdfs://``, ``s3a://``... URI.

    The store's reader (DuckDB), the job's driver-side findings write and its checkpoint
    layout record work on local folders only; URIs go through Spark, and the pairing and the
    compactor through pyarrow's file systems (:mod:`streaming.storefs`).
    """
    return not is_uri(location)


def finding_schema() -> Any:
    """The findings table's Arrow schema (:data:`FINDING_COLUMNS`)."""
    import pyarrow as pa

    types = {"string": pa.string(), "int": pa.int32(), "long": pa.int64()}
    return pa.schema([pa.field(name, types[t]) for name, t in FINDING_COLUMNS])


def write_findings_locally(store: Path, batch_id: int, rows: list[tuple[Any, ...]]) -> Path:
    """``<store>/findings/batch_id=<n>/part-00000.parquet`` with pyarrow, from the driver.

    The findings are already on the driver (a few per batch); a Spark write of them is a
    job, a task and Hadoop's commit protocol per batch. Measured with ``bench.spark_bench``
    (docs/benchmarks.md, fifth round), the sink's store step fell by 0.2-0.4 s per batch
    (100k partitions: 1.47 -> 1.11 s; 10k: 0.55 -> 0.36 s). Same columns and types as
    ``FINDING_DDL``; replacing the folder keeps a replayed batch idempotent, and the file is
    complete before it appears under ``batch_id=<n>/`` (readers glob only those).

    Written in ``findings/_tmp-<uuid>/`` (0700, the file 0600), then put in place by
    :func:`replace_dir`; a write that fails removes its ``_tmp-<uuid>`` folder, and the
    batch's previous folder, if any, stays as it was.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema_ = finding_schema()
    table = pa.Table.from_pylist([dict(zip(schema_.names, r, strict=True)) for r in rows], schema_)
    root = store / FINDINGS
    private_dir(root)
    tmp = root / f"{TEMPORARY}{uuid.uuid4().hex}"
    final = root / f"batch_id={batch_id}"
    private_dir(tmp)
    try:
        with private_file(tmp / "part-00000.parquet") as f:
            pq.write_table(table, f)
        replace_dir(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # a failed write's, or the old folder swapped out
    return final / "part-00000.parquet"


_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


@functools.cache
def _renameat2() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2  # glibc 2.28+
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where the
    system or the file system cannot (then nothing moved)."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def replace_dir(new: Path, final: Path) -> None:
    """Put the folder ``new`` at ``final``, a reader seeing the old folder or the new one.

    No folder is ever missing at ``final`` where the two can be swapped in one step
    (:func:`exchange`: the old one is then at ``new``'s name, for the caller to remove).
    Elsewhere the old folder is renamed aside (``_old-<uuid>``), the new one renamed into
    place and the old removed -- ``final`` is missing only between two renames, never
    while a tree is deleted; should the second rename fail, the old folder goes back.
    """
    if not final.exists():
        new.rename(final)
        return
    if exchange(new, final):
        return
    aside = final.with_name(f"{OLD}{uuid.uuid4().hex}")
    final.rename(aside)
    try:
        new.rename(final)
    except BaseException:
        aside.rename(final)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _is_temporary(name: str) -> bool:
    return name.startswith((TEMPORARY, OLD)) or ".tmp-" in name or name.endswith(".parquet.tmp")


def clear_temporaries(store: str) -> int:
    """Remove what writes cut short left in the store (a job killed mid-write): ``_tmp-*``
    and ``_old-*`` folders and files, and ``*.tmp-*`` files, in the store's root, in
    ``findings/`` and in ``snapshot/``; return how many.

    Only when the job starts, once the store is paired with its checkpoint
    (:func:`streaming.storefs.pair`: no other job writes it) and before the batches and
    the compactor's thread: then no write of this store is in flight.
    """
    loc = Location.maybe(store, "store")
    if loc is None:
        return 0
    removed = 0
    for sub in ("", FINDINGS, posixpath.dirname(SNAPSHOT_FILE)):
        for path, _ in loc.entries(sub):
            if _is_temporary(posixpath.basename(path)):
                loc.remove(path)
                removed += 1
    if removed:
        log.info("store %s: removed %d temporaries left by an earlier run", store, removed)
    return removed


def compact(store: str, upto_batch: int) -> int:
    """Fold batches ``<= upto_batch`` into the snapshot (latest row per partition, tombstones
    of deleted topics left out); return rows.

    History older than the snapshot is dropped. Call it only for batches the query has
    committed (a replayed batch rewrites only the newest, uncommitted batch folder).
    """
    root = Path(store)
    batches = sorted(
        int(p.name.split("=", 1)[1])
        for p in root.glob(f"{STATE}/batch_id=*")
        if int(p.name.split("=", 1)[1]) <= upto_batch
    )
    if not batches:
        return 0
    src = sources_sql(store)
    con = connect()
    final = root / SNAPSHOT_FILE
    private_dir(final.parent)
    # DuckDB makes the file (its mode the umask's): in a 0700 folder of its own until private.
    work = final.parent / f"{TEMPORARY}{uuid.uuid4().hex}"
    private_dir(work)
    tmp = work / final.name
    try:
        con.execute(
            f"COPY (SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER (PARTITION BY "
            f"cluster, topic, partition ORDER BY {NEWEST_FIRST}) AS rn FROM ({src}) "
            f"WHERE batch_id <= {int(upto_batch)}) WHERE rn = 1 AND deleted_at IS NULL) "
            "TO ? (FORMAT parquet)",
            [str(tmp)],
        )
        os.chmod(tmp, FILE_MODE)
        n = int(con.execute("SELECT count(*) FROM read_parquet(?)", [str(tmp)]).fetchone()[0])
        tmp.replace(final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    Location.of(str(root)).write_json(SNAPSHOT_MARK, {"upto_batch": upto_batch})
    for b in batches:
        shutil.rmtree(root / STATE / f"batch_id={b}", ignore_errors=True)
    return n


# --- keeping the store small -------------------------------------------------------------------


#: How long findings are kept (``findings_retention_s``'s default): 30 days.
FINDINGS_RETENTION_S = 30 * 86_400.0


class Compactor:
    """A driver hook that keeps the store small, off the batch's path.

    Every ``every`` batches it wakes its own thread (the hook itself only records the batch
    id: a batch never waits on compaction, and a compaction error never fails a batch) to

    * fold the state batches older than ``history_s`` into the snapshot (one row per
      partition), so "latest state" questions read ~one row per partition plus the recent
      history, not every row ever written (recent batches stay: ``explain``'s history);
    * fold the findings batches into one file per compaction, dropping the findings older
      than ``findings_retention_s`` -- except a condition still open (its ``open`` without a
      ``resolved``): the exporter, seeded from the stored findings at start, must still
      show it (:func:`compact_findings`).

    Only batches before the current one are folded (those the query has committed). A
    local store is compacted by DuckDB over its files; a URI through pyarrow's file systems
    (:class:`~streaming.storefs.Location`: S3, HDFS, ``file://``...), the folded batches
    held in memory. Errors are logged and counted (``errors``; the exporter's
    ``kafka_replication_store_compaction_errors_total``), and the next round tries again. A
    reader that loses a file to a concurrent compaction retries (:class:`StoreReader`).
    """

    def __init__(
        self,
        store: str,
        every: int = 100,
        history_s: float = 3600.0,
        findings_retention_s: float = FINDINGS_RETENTION_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.every = every
        self.history_s = history_s
        self.findings_retention_s = findings_retention_s
        self.clock = clock
        self.location = Location.maybe(store, "store") if every > 0 else None
        self.compactions = 0
        self.errors = 0
        self.last_error: str | None = None
        self._cv = threading.Condition()
        self._pending: int | None = None
        self._busy = False
        self._stopped = False
        self._thread: threading.Thread | None = None

    def __call__(self, batch: Any) -> None:
        batch_id = int(batch.batch_id)
        if self.location is None or batch_id % self.every:
            return
        with self._cv:
            self._pending = batch_id
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="store-compactor", daemon=True
                )
                self._thread.start()
            self._cv.notify_all()

    def wait(self, timeout_s: float = 300.0) -> None:
        """Until the requested compactions are done (tests, shutdown)."""
        with self._cv:
            self._cv.wait_for(lambda: self._pending is None and not self._busy, timeout_s)

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._pending is not None or self._stopped)
                if self._stopped:
                    return
                batch_id, self._pending, self._busy = self._pending, None, True
            try:
                assert batch_id is not None
                self.run(batch_id)
            except Exception as e:  # counted and logged: the next round tries again
                self.errors += 1
                self.last_error = f"{type(e).__name__}: {e}"[:300]
                log.warning("store compaction after batch %s failed: %s", batch_id, e)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def run(self, batch_id: int) -> None:
        """One compaction of the batches before ``batch_id`` (synchronous)."""
        loc = self.location
        if loc is None:
            return
        now = self.clock()
        old = [
            b
            for b in loc.batches(STATE)
            if b < batch_id and _mtime(loc, STATE, b) < now - self.history_s
        ]
        if old:
            if is_uri(self.store):
                compact_remote(loc, max(old))
            else:
                compact(self.store, max(old))
        compact_findings(loc, batch_id - 1, int((now - self.findings_retention_s) * 1000))
        self.compactions += 1


def _mtime(loc: Location, sub: str, batch: int) -> float:
    """When a batch folder was written: the folder's time, or (object stores keep none for
    folders) its newest file's."""
    folder = loc.fs.get_file_info(loc.join(f"{sub}/batch_id={batch}"))
    if folder.mtime is not None:
        return float(folder.mtime.timestamp())
    infos = loc.fs.get_file_info(loc.files(f"{sub}/batch_id={batch}"))
    stamps = [i.mtime.timestamp() for i in infos if i.mtime is not None]
    return max(stamps, default=0.0)


def _arrow(con: Any, sql: str) -> Any:
    """The result of ``sql`` as an Arrow table."""
    table = con.sql(sql).to_arrow_table()  # not execute(): DB-API output copies the rows
    assert table is not None
    return table


def _read_batches(loc: Location, sub: str, batches: list[int]) -> Any:
    """The rows of ``<sub>/batch_id=<n>`` folders as one Arrow table with ``batch_id``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for b in batches:
        for path in loc.files(f"{sub}/batch_id={b}"):
            t = pq.read_table(path, filesystem=loc.fs)
            tables.append(t.append_column("batch_id", pa.array([b] * t.num_rows, pa.int64())))
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="default")


def _write_parquet(loc: Location, table: Any, tmp: str, final: str) -> None:
    """``table`` at ``final``: written whole at ``tmp`` (private locally), then moved; a
    failed write removes ``tmp``."""
    import pyarrow.parquet as pq

    try:
        with loc.open_new(tmp) as f:
            pq.write_table(table, f)
        loc.fs.move(tmp, final)
    except BaseException:
        loc.remove(tmp)
        raise


def compact_remote(loc: Location, upto_batch: int) -> int:
    """:func:`compact` through pyarrow's file systems (a store on a URI); return rows."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    batches = [b for b in loc.batches(STATE) if b <= upto_batch]
    rows = _read_batches(loc, STATE, batches)
    if rows is None:
        return 0
    if loc.exists(SNAPSHOT_FILE):
        snap = pq.read_table(loc.join(SNAPSHOT_FILE), filesystem=loc.fs)
        rows = pa.concat_tables([snap, rows], promote_options="default")
    con = duckdb.connect()
    con.register("rows_", rows)
    newest = _arrow(
        con,
        f"SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER (PARTITION BY cluster, "
        f"topic, partition ORDER BY {NEWEST_FIRST}) AS rn FROM rows_) "
        "WHERE rn = 1 AND deleted_at IS NULL",
    )
    tmp = loc.join(f"{SNAPSHOT_FILE}.tmp-{uuid.uuid4().hex[:8]}")
    loc.make_dir(loc.join(posixpath.dirname(SNAPSHOT_FILE)))
    _write_parquet(loc, newest, tmp, loc.join(SNAPSHOT_FILE))
    loc.write_json(SNAPSHOT_MARK, {"upto_batch": upto_batch})
    for b in batches:
        loc.delete_dir(f"{STATE}/batch_id={b}")
    return int(newest.num_rows)


def compact_findings(loc: Location, upto_batch: int, horizon_ms: int) -> int:
    """Fold the findings batches ``<= upto_batch`` into one file in ``batch_id=<upto>``, each
    finding once (its first write; :data:`FINDING_IDENTITY`), without those detected before
    ``horizon_ms`` (ms) -- but keeping the ``open`` of every condition with no ``resolved``
    after it. Return the rows kept (-1: nothing to do).

    Safe for a concurrent reader: the folded file appears first (the reader's view takes
    each finding once, its first batch's row), then the folded batches go.
    """
    import duckdb

    batches = [b for b in loc.batches(FINDINGS) if b <= upto_batch]
    if not batches:
        return -1
    folder = f"{FINDINGS}/batch_id={batches[-1]}"
    before = loc.files(folder)
    rows = _read_batches(loc, FINDINGS, batches)
    if rows is None:
        return -1
    for name in LATER_FINDING_COLUMNS:  # rows written before the column existed
        if name not in rows.column_names:
            import pyarrow as pa

            kind = finding_schema().field(name).type
            rows = rows.append_column(name, pa.nulls(rows.num_rows, kind))
    con = duckdb.connect()
    con.register("f_", rows)
    # An open is still open unless a resolve of its condition (the same opened_at) comes
    # after it: a later seq (rows stored without one: any resolve, as before).
    condition = ("cluster", "topic", "partition", "broker", "kind", "opened_at")
    same = " AND ".join(f'r."{c}" IS NOT DISTINCT FROM o."{c}"' for c in condition)
    columns = ", ".join(f'"{name}"' for name, _ in FINDING_COLUMNS)
    kept = _arrow(
        con,
        f"WITH once AS (SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER (PARTITION BY "
        f"{FINDING_IDENTITY} ORDER BY batch_id) AS rn FROM f_) WHERE rn = 1), "
        f"resolved AS (SELECT {', '.join(condition)}, max(coalesce(seq, -1)) AS last FROM once "
        "WHERE state = 'resolved' GROUP BY ALL) "
        f'SELECT {columns} FROM once o WHERE coalesce(detected_at, "at") >= {int(horizon_ms)} '
        f"OR (state = 'open' AND NOT EXISTS (SELECT 1 FROM resolved r WHERE {same} "
        "AND r.last >= coalesce(o.seq, -1))) "
        f"ORDER BY {FINDINGS_IN_ORDER}",
    )
    if len(batches) == 1 and len(before) == 1 and kept.num_rows == rows.num_rows:
        return int(kept.num_rows)  # one file already, nothing aged out
    loc.make_dir(loc.join(folder))
    name = f"part-folded-{uuid.uuid4().hex[:8]}.parquet"
    _write_parquet(loc, kept, loc.join(FINDINGS, f"{TEMPORARY}{name}"), loc.join(folder, name))
    for b in batches[:-1]:
        loc.delete_dir(f"{FINDINGS}/batch_id={b}")
    for path in before:
        loc.fs.delete_file(path)
    return int(kept.num_rows)
