"""The state store and the checkpoint as file systems: local folders and URIs alike.

Spark writes the store and the checkpoint wherever their locations point (a folder, or a
Hadoop URI: ``hdfs://``, ``s3a://``, ``file://``). What the job does to them *besides*
Spark -- pair a checkpoint with its store, keep the bytes of records too large, fold old
batches, age out findings -- goes through pyarrow's file systems (:class:`Location`), so
it works the same on every one pyarrow reaches (local, ``file://``, S3, HDFS with
``libhdfs``, GCS), not by looking for ``://`` in a string. A URI pyarrow cannot open
(an ``s3a://`` is read as ``s3://``; HDFS without its native library) is reported once
and skipped: the job runs on, without those chores.

The checkpoint/store pair (:func:`pair`): each micro-batch writes ``batch_id=<n>`` folders,
and a partition's newest row is the one of the highest batch. A new checkpoint restarts
batch ids at 0: with an old store, the old rows would win, and the runbook and the
exporter would show stale state, silently. So a checkpoint records which store it writes
(an id shared by both) and the offset its batch ids get in that store: a new checkpoint
on a store that already holds batches continues after the store's last batch.

Private: what the job writes on a local file system is its own user's only, whatever the
umask -- folders :data:`DIR_MODE`, files :data:`FILE_MODE` (:func:`private_dir`,
:func:`private_file`, and the ``Location`` methods that write); Spark's own files get the
same through :data:`PRIVATE_SPARK_CONF`. Whoever can write the checkpoint runs code in the
job's Python workers (docs/reliability.md, "Who may write the checkpoint and the store").
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import posixpath
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from monitor.contract.store import STORE_PAIR

log = logging.getLogger("streaming.store")

_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_BATCH = re.compile(r"^batch_id=(\d+)$")

#: The pairing records: in the checkpoint (id and batch offset) and in the store (id and
#: when the checkpoint began: :data:`monitor.contract.store.STORE_PAIR`).
CHECKPOINT_PAIR = "monitor-store.json"


#: The modes of what the job writes locally (the store, its temporaries, the checkpoint's
#: records): the job's own user only, whatever the process umask.
DIR_MODE = 0o700
FILE_MODE = 0o600
#: The job process's umask (:func:`private_process`): what the JVM Spark runs in inherits.
UMASK = 0o077
#: Spark's Hadoop file systems do not follow the process umask: they set every file and
#: folder they create to 0666/0777 less ``fs.permissions.umask-mode`` (default 022) -- the
#: checkpoint and the state rows were 0644/0755 under umask 077 (measured, Spark 4.3 with
#: Hadoop 3.5). With this, 0600/0700 even under umask 000 (local and HDFS; S3 keeps none).
PRIVATE_SPARK_CONF = {"spark.hadoop.fs.permissions.umask-mode": f"{UMASK:03o}"}


def private_process() -> int:
    """Set the process umask to :data:`UMASK` (before Spark starts: its JVM and the Python
    workers inherit it); return the previous one."""
    return os.umask(UMASK)


def private_dir(path: str | os.PathLike[str]) -> None:
    """``mkdir -p`` where every folder it creates is :data:`DIR_MODE` whatever the umask
    (folders that exist are left as they are: the operator's)."""
    missing: list[Path] = []
    p = Path(path)
    while not p.is_dir():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            if not d.is_dir():
                raise
            continue  # made meanwhile by someone else: not ours to change
        os.chmod(d, DIR_MODE)  # the umask can only take bits away: exactly 0700


def private_file(path: str | os.PathLike[str]) -> IO[bytes]:
    """A new file (never an existing one: ``O_EXCL``) opened for writing, :data:`FILE_MODE`
    from its creation whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def is_uri(location: str) -> bool:
    """A URI (``hdfs://``, ``s3a://``, ``file://``...), not a folder path.

    >>> is_uri("s3a://bucket/store"), is_uri("/var/lib/store"), is_uri("store")
    (True, False, False)
    """
    return bool(_URI.match(location))


class StorePairError(ValueError):
    """The store belongs to another checkpoint."""


@dataclass(frozen=True)
class Location:
    """A folder on one of pyarrow's file systems (``fs``) at ``path``, as given (``uri``)."""

    fs: Any
    path: str
    uri: str

    @classmethod
    def of(cls, location: str) -> Location:
        """The file system of a folder or URI; raises ``OSError``/``ValueError`` when pyarrow
        cannot open it."""
        import pyarrow.fs as pafs

        if not is_uri(location):
            return cls(pafs.LocalFileSystem(), posixpath.abspath(location), location)
        uri = re.sub(r"^s3[an]://", "s3://", location)
        fs, path = pafs.FileSystem.from_uri(uri)
        return cls(fs, path.rstrip("/"), location)

    @classmethod
    def maybe(cls, location: str, what: str) -> Location | None:
        """:meth:`of`, or None (logged) when pyarrow cannot open the location."""
        try:
            return cls.of(location)
        except (OSError, ValueError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            log.warning("%s %s: not reachable through pyarrow (%s); skipped", what, location, first)
            return None

    def join(self, *parts: str) -> str:
        return posixpath.join(self.path, *parts)

    @property
    def local(self) -> bool:
        """On this machine's file system (modes apply: :func:`private_dir`)."""
        import pyarrow.fs as pafs

        return isinstance(self.fs, pafs.LocalFileSystem)

    def make_dir(self, path: str) -> None:
        """The folder ``path`` (a full path: :meth:`join`) and its parents; private locally."""
        if self.local:
            private_dir(path)
        else:
            self.fs.create_dir(path, recursive=True)

    def open_new(self, path: str) -> Any:
        """A new file at ``path`` (a full path) to write; private locally."""
        return private_file(path) if self.local else self.fs.open_output_stream(path)

    def remove(self, path: str) -> None:
        """The file or folder at ``path`` (a full path), if there."""
        import pyarrow.fs as pafs

        kind = self.fs.get_file_info(path).type
        with contextlib.suppress(FileNotFoundError):
            if kind == pafs.FileType.Directory:
                self.fs.delete_dir(path)
            elif kind != pafs.FileType.NotFound:
                self.fs.delete_file(path)

    def entries(self, rel: str = "") -> list[tuple[str, bool]]:
        """(full path, is a folder) of what is directly in ``rel``."""
        import pyarrow.fs as pafs

        sel = pafs.FileSelector(self.join(rel) if rel else self.path, allow_not_found=True)
        return [(i.path, i.type == pafs.FileType.Directory) for i in self.fs.get_file_info(sel)]

    def exists(self, rel: str = "") -> bool:
        import pyarrow.fs as pafs

        info = self.fs.get_file_info(self.join(rel) if rel else self.path)
        return bool(info.type != pafs.FileType.NotFound)

    def batches(self, sub: str) -> list[int]:
        """The batch ids of ``<sub>/batch_id=<n>`` folders, ascending."""
        import pyarrow.fs as pafs

        sel = pafs.FileSelector(self.join(sub), allow_not_found=True)
        ids = []
        for info in self.fs.get_file_info(sel):
            m = _BATCH.match(info.base_name)
            if m and info.type == pafs.FileType.Directory:
                ids.append(int(m.group(1)))
        return sorted(ids)

    def files(self, rel: str, suffix: str = ".parquet") -> list[str]:
        """Full paths of the files ending in ``suffix`` directly in ``rel``."""
        import pyarrow.fs as pafs

        sel = pafs.FileSelector(self.join(rel), allow_not_found=True)
        return sorted(
            i.path
            for i in self.fs.get_file_info(sel)
            if i.type == pafs.FileType.File and i.base_name.endswith(suffix)
        )

    def read_json(self, rel: str) -> Any:
        """The JSON file's content, or None when absent; ValueError when unreadable."""
        if not self.exists(rel):
            return None
        with self.fs.open_input_stream(self.join(rel)) as f:
            return json.loads(f.read().decode())

    def write_json(self, rel: str, value: Any) -> None:
        """Written whole: to a temporary name, then moved over the old (atomic where the file
        system renames atomically; object stores copy)."""
        self.make_dir(posixpath.dirname(self.join(rel)))
        tmp = self.join(f"{rel}.tmp-{uuid.uuid4().hex[:8]}")
        try:
            with self.open_new(tmp) as f:
                f.write((json.dumps(value) + "\n").encode())
            self.fs.move(tmp, self.join(rel))
        except BaseException:
            self.remove(tmp)
            raise

    def delete_dir(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_dir(self.join(rel))


def pair(checkpoint: str, store: str) -> int:
    """Pair the checkpoint with the store; return the offset the job adds to its batch ids
    in the store (0 unless a new checkpoint was started on a store that has batches).

    * a checkpoint paired with this store: its offset;
    * a store paired with another checkpoint: :class:`StorePairError` (the job refuses);
    * a new checkpoint on a store with batches: continue after the store's last batch, so
      the new rows are the newest (the store's older history stays readable);
    * a checkpoint (or store) from before the pairing: paired as it is, offset 0.

    Locations pyarrow cannot open are not paired (logged): offset 0, as before.
    """
    ck = Location.maybe(checkpoint, "checkpoint")
    st = Location.maybe(store, "store")
    if ck is None or st is None:
        return 0
    have = ck.read_json(CHECKPOINT_PAIR)
    theirs = st.read_json(STORE_PAIR)
    store_pair = theirs.get("pair") if isinstance(theirs, dict) else None
    if isinstance(have, dict) and isinstance(have.get("pair"), str):
        offset = int(have.get("batch_offset", 0))
        if store_pair not in (None, have["pair"]):
            raise StorePairError(
                f"store {store} is paired with another checkpoint ({store_pair}; checkpoint "
                f"{checkpoint} is paired with {have['pair']}): give each job its own --store, "
                "or start this one on the store's own --checkpoint"
            )
        if store_pair is None:
            st.write_json(STORE_PAIR, {"pair": have["pair"], "since": have.get("since", 0)})
        return offset
    started = bool(ck.files("offsets", ""))  # Spark's offset log: a file per batch
    if started and store_pair is not None:
        raise StorePairError(
            f"store {store} is paired with another checkpoint ({store_pair}) and checkpoint "
            f"{checkpoint} has batches of its own: give each job its own --store"
        )
    offset, since = 0, 0
    if not started:
        last = max([-1, *st.batches("state"), *st.batches("findings")])
        offset = last + 1
        since = time.time_ns() // 1_000_000  # a new checkpoint: it replays from here
    new = {"pair": uuid.uuid4().hex, "batch_offset": offset, "since": since}
    ck.write_json(CHECKPOINT_PAIR, new)
    st.write_json(STORE_PAIR, {"pair": new["pair"], "since": since})
    if offset:
        log.info(
            "store %s holds batches up to %d: the new checkpoint %s writes from batch %d on",
            store, offset - 1, checkpoint, offset,
        )  # fmt: skip
    return offset
