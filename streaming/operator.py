"""The stateful operator: one ``ClusterModel`` per hash bucket of partitions, in Spark state.

Why buckets. A Python stateful operator pays a fixed cost per *key* per micro-batch (the
state API is a socket round trip per call, plus an Arrow batch per group): keyed by single
partition that is 1-2 ms x 100k partitions per batch. Keyed by ``pmod(xxhash64(cluster,
topic, partition), N)`` (grouped by the key :func:`bucket_keys` gives that index, so that
the buckets spread evenly over Spark's tasks) the cost is paid N times per batch, and each
key's events are a plain Python loop over ``ClusterModel.apply`` — the model stays pure and
per-partition semantics are kept (the model itself routes each event to its partition's
state).

State layout, per bucket (key): a snapshot plus a delta log (:class:`BucketStore`).

* ``meta`` — ValueState: the version (sequence number + random tag), where the snapshot
  and the log stand;
* ``base`` — ValueState[binary]: the bucket's :class:`Bucket` (its ``ClusterModel`` and
  bookkeeping), pickled with reducers for the model's slotted dataclasses;
* ``deltas`` — MapState[seq -> (tag, prev tag, blob)]: per micro-batch, only the
  partition, topic and broker states the batch changed -- or, for a batch that changed
  most of the bucket, its input (:class:`Replay`), to be applied again.

A batch pays for what it touched, not for the bucket's size; a new snapshot is written
when the deltas since the last one outgrow it (staggered across buckets). A batch of whole
collection rounds changes every partition: it is stored as its input while the bucket's
worker keeps it in memory (a snapshot every ``replay_batches + 1`` such batches), as the bucket's
snapshot otherwise.

A Python worker keeps the models it last wrote in memory, keyed by bucket and version.
When the version in ``meta`` equals the cached one, nothing else is read or unpickled; when
the cache is a few versions behind (the bucket ran on the other worker), the missing deltas
are applied to it, their tag chain checked; any other mismatch — a task retry, a restart
from the checkpoint, another history — falls back to the snapshot and its deltas.
Correctness never depends on the cache.

Topic and broker events are fanned out (JVM side) to every bucket, because every bucket
needs a topic's ``min.insync.replicas`` for its partitions; only the bucket that *owns* the
topic or broker (``crc32(key) mod N``, :class:`OwnsGlobal`) reports topic- and
broker-level findings. Each bucket validates the records it reads (:mod:`streaming.records`)
and writes the dead letters of those it owns; records the JVM cannot route travel on bucket
``-1`` and come out as dead letters there.

Order: within a bucket and micro-batch, events are applied sorted by ``observed_at``, then
a stable kind order (``topic_config``, ``broker``, then partition-level events), then the
source (Kafka partition, offset) order; exact duplicates are dropped. Events older than
what the model has applied for the same source are ignored by the model itself.

Time: a processing-time timer per bucket calls ``ClusterModel.tick(now)`` every
``tick_ms``. ``now`` is the micro-batch's timestamp (fixed in the offset log, so a
replayed batch ticks at the same instant and produces the same finding ids), except that a
bucket which received events in this batch ticks at most ``catchup_slack_ms`` past the
newest ``observed_at`` it applied: replaying a backlog must not look like silence.
"""

from __future__ import annotations

import contextlib
import copyreg
import functools
import gc
import io
import json
import operator
import pickle
import struct
import uuid
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from itertools import chain
from typing import Any

import msgspec
import pyarrow as pa
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from monitor.contract.events import (
    CLUSTER_MAX_LENGTH,
    PARTITION_KEY_PREFIX,
    TOPIC_MAX_LENGTH,
    ReplicaSample,
    parse_event,
    partition_key,
    shown,
)
from monitor.contract.state import state_json
from monitor.model import (
    ClusterModel,
    Finding,
    ModelConfig,
    PartitionMeta,
    PartitionRound,
    ReplicaReport,
    TopicConfigReport,
    stamps,
)
from monitor.model.batch import apply_noting, rows_to_write
from monitor.model.order import application_order
from monitor.model.state import (
    BrokerState,
    EpochEntry,
    OpenCondition,
    PartitionState,
    ReplicaState,
    TopicState,
)
from streaming.records import MODEL_CLASSES, MODEL_FIELDS, EventError, read_record
from streaming.schema import RULES, FieldRule

#: Bucket of records that failed validation (they are forwarded as dead letters).
DEAD_BUCKET = -1


def spark_int_hash(value: int, seed: int = 42) -> int:
    """Spark's ``hash()`` of an ``int`` (Murmur3 x86 32-bit, seed 42), as a signed int.

    It is what Spark's hash partitioning applies to a grouping key: the shuffle partition of
    key ``k`` is ``pmod(hash(k), spark.sql.shuffle.partitions)``.
    """
    m = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & m

    k = rotl((value * 0xCC9E2D51) & m, 15) * 0x1B873593 & m
    h = rotl(seed ^ k, 13)
    h = (h * 5 + 0xE6546B64) & m
    h ^= 4
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & m
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & m
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


@functools.cache
def bucket_keys(buckets: int) -> tuple[int, ...]:
    """The grouping key of each bucket index: ``keys[i]`` hashes to ``i`` modulo ``buckets``.

    Grouped by the plain index ``0..N-1``, Spark's hash partitioning spread the buckets
    unevenly over the shuffle partitions (16 buckets on 2 partitions: 7 and 9; on 4: 3, 3, 4,
    6), so one task ran up to 1.5x the others' work while its cores idled. With these keys,
    ``pmod(hash(keys[i]), P) == i mod P`` for every ``P`` that divides ``N``: each shuffle
    partition gets exactly ``N / P`` buckets. The keys are the first integers hitting each
    residue (about ``N ln N`` tries), so they do not depend on ``P``.

    >>> keys = bucket_keys(4)
    >>> [spark_int_hash(k) % 4 for k in keys], [spark_int_hash(k) % 2 for k in keys]
    ([0, 1, 2, 3], [0, 1, 0, 1])
    """
    keys = [-1] * buckets
    missing, candidate = buckets, 0
    while missing:
        i = spark_int_hash(candidate) % buckets
        if keys[i] < 0:
            keys[i] = candidate
            missing -= 1
        candidate += 1
    return tuple(keys)


@functools.cache
def bucket_index(buckets: int) -> dict[int, int]:
    """Bucket key -> bucket index (the inverse of :func:`bucket_keys`)."""
    return {k: i for i, k in enumerate(bucket_keys(buckets))}


#: The operator's input is three columns: ``bucket``, ``payload`` (one string per event,
#: built on the JVM) and ``value`` (the original bytes, dead letters only). Why one packed
#: string: pyspark 4.3's transformWithStateInPandas regroups its input row by row
#: (``itertuples`` + ``pd.DataFrame(rows)``), a cost proportional to rows x columns — with the
#: event's ~30 columns that was ~70 us per event, five times the model itself.
#:
#: Payload of a routed record: ``src_partition SEP src_offset SEP T|F|K<key> SEP src_topic
#: SEP kafka_ts SEP record`` -- the record itself, read and validated here
#: (:func:`streaming.records.read_record`, :func:`ordered_events`); equal records are exact
#: duplicates. Dead bucket: ``src_partition SEP src_offset SEP f SEP source topic SEP
#: reason`` (empty for a record the JVM could not route: pydantic's is given here).
#:
#: The form before, still read for a stored :class:`Replay`: ``src_partition SEP src_offset
#: SEP t|f SEP body``, the body a JSON object (Spark's ``to_json``, nulls kept) whose first
#: member is the kind's code (:data:`KIND_CODES`) and whose other members are the model
#: event's constructor arguments in order (:data:`BODY_FIELDS`, under the short names
#: :data:`BODY_NAMES`); a round record's has :data:`SAMPLES_MEMBER` more, each sample an
#: array of its values in :data:`SAMPLE_FIELDS` order.
SEP = "\x1f"
#: The owner field of a record's payload (``T``: this bucket owns it, ``F``: a copy of a
#: topic or broker event); ``t``/``f`` mark a body of the form before (stored replays).
RECORD_OWNER, RECORD_OTHER = "T", "F"
#: ... or ``K`` and the record's Kafka key: routed by its key alone
#: (:data:`monitor.contract.events.PARTITION_KEY_PREFIX`), owned, and refused unless the
#: record is that partition's (:func:`_key_reason`).
RECORD_KEYED = "K"
#: The longest key the job routes by (the prefix, a partition number of at most 10 digits,
#: the longest topic name (ASCII) and cluster name (UTF-8, up to 4 bytes a character) the
#: contract accepts): a longer one cannot be a partition's.
MAX_KEY_BYTES = len(PARTITION_KEY_PREFIX) + 10 + 1 + TOPIC_MAX_LENGTH + 1 + 4 * CLUSTER_MAX_LENGTH
KIND_CODES: dict[str, str] = {
    "topic_config": "t",
    "topic_deleted": "d",
    "broker": "b",
    "partition": "p",
    "replica": "r",
}
#: Per kind, the contract fields of the body, in the model event's constructor order.
BODY_FIELDS = MODEL_FIELDS
#: JSON member names of the body: :data:`BODY_KIND` (kind code), then ``a``, ``b``, ... by
#: position (never ``k``).
BODY_KIND = "k"
BODY_NAMES: tuple[str, ...] = tuple("abcdefghijlmnopqrstuvwxyz")
assert BODY_KIND not in BODY_NAMES and all(len(f) <= len(BODY_NAMES) for f in BODY_FIELDS.values())
#: A round record's samples: the member after the partition event's fields, and the order
#: of each sample's values (the contract's, ``monitor.contract.events.ReplicaSample``).
SAMPLES_MEMBER = BODY_NAMES[len(BODY_FIELDS["partition"])]
SAMPLE_FIELDS: tuple[str, ...] = tuple(ReplicaSample.model_fields)
assert SAMPLE_FIELDS[:2] == ("broker", "log_end_offset") and SAMPLE_FIELDS[-1] == "observed_at"
#: The member holding ``observed_at`` (second constructor argument of every event).
_OBSERVED = BODY_NAMES[1]
assert all(f[1] == "observed_at" for f in BODY_FIELDS.values())

#: What the operator emits (one schema for every kind of output row).
OUTPUT_DDL = (
    "out string, key string, value binary, reason string, src_topic string, "
    "src_partition int, src_offset long, bucket int, n_events long, n_duplicates long, "
    "n_findings long, n_partitions long, state_bytes long, seq long, n_states long"
)


class OwnsGlobal:
    """``owns_global`` of one bucket: does it report this topic's or broker's findings?

    A class, not a lambda, so a bucket's model pickles. crc32 is what Spark's ``crc32``
    computes too, so the JVM side can tell which fanned-out copy is the owner's.
    """

    __slots__ = ("bucket", "buckets")

    def __init__(self, bucket: int, buckets: int) -> None:
        self.bucket = bucket
        self.buckets = buckets

    def __call__(self, key: str) -> bool:
        return zlib.crc32(key.encode()) % self.buckets == self.bucket

    def __reduce__(self) -> tuple[type[OwnsGlobal], tuple[int, int]]:
        return (OwnsGlobal, (self.bucket, self.buckets))


@dataclass(slots=True)
class Bucket:
    """What one state key holds: the model and the operator's own bookkeeping."""

    model: ClusterModel
    #: Timestamp (ms) of the micro-batch that last delivered events, and the newest
    #: observed_at among them: the catch-up clamp of the tick clock.
    input_batch_ts: int = -1
    input_max_observed: int = -1
    #: Processing time of the registered timer (-1: none).
    timer_at: int = -1
    events: int = 0
    duplicates: int = 0
    ticks: int = 0
    #: Pickled size of the last snapshot, and of the deltas written since.
    base_bytes: int = 0
    delta_bytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


#: The bookkeeping fields of :class:`Bucket` a delta carries (all but the model).
HEADER_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Bucket) if f.name != "model")


@dataclass(slots=True)
class Delta:
    """What changed in a bucket in one micro-batch: its bookkeeping and the dirty states."""

    header: tuple[Any, ...]
    #: None: forgotten (its topic was deleted).
    partitions: dict[tuple[str, str, int], PartitionState | None]
    topics: dict[tuple[str, str], TopicState | None]
    brokers: dict[tuple[str, int], BrokerState]
    #: Partitions forgotten (their topic deleted) and created again in the batch: a new
    #: history, last in the model's order as in the live model (ticks walk that order).
    renewed: tuple[tuple[str, str, int], ...] = ()

    def apply_to(self, bucket: Bucket) -> None:
        for k in self.renewed:
            bucket.model.partitions.pop(k, None)
        bucket.model.restore(self.partitions, self.topics, self.brokers)
        _restore_header(bucket, self.header)


def _header(bucket: Bucket) -> tuple[Any, ...]:
    """A bucket's bookkeeping (:data:`HEADER_FIELDS`), as a delta stores it."""
    return tuple(getattr(bucket, n) for n in HEADER_FIELDS)


def _restore_header(bucket: Bucket, header: tuple[Any, ...]) -> None:
    """Set a bucket's bookkeeping as stored; the model's tombstones travel in it."""
    for name, value in zip(HEADER_FIELDS, header, strict=True):
        setattr(bucket, name, value)
    bucket.model.deleted = dict(bucket.extra.get("deleted", {}))


@dataclass(slots=True)
class Replay:
    """A micro-batch's input, stored in place of the states it changed: applied again to
    the version before, it gives the version after (the model is a pure function of its
    state and the events, in :func:`ordered_events`' order).

    Written for a batch that changed most of a bucket (every collection round does), where
    the alternative is the bucket's whole snapshot -- flattening and pickling every
    partition (``bench.operator_bench --compare-replay``: the save 2.0 us a round against
    7-9, docs/benchmarks.md). The price is paid on a load that misses the worker cache:
    the batches since the snapshot applied again (at most ``replay_batches``), which is
    why :meth:`BucketStore.save` writes one only for a bucket whose recent loads all hit.
    """

    #: The bookkeeping after the batch (:data:`HEADER_FIELDS`), restored as it was: the
    #: timer, counts and clamps are the batch's, not the replay's.
    header: tuple[Any, ...]
    #: The thresholds the batch was judged with (a restart may bring others: they apply
    #: after the replay, as to a loaded snapshot).
    config: ModelConfig
    #: The payloads of each input frame, in order (the operator orders within a frame).
    frames: list[list[str]]

    def apply_to(self, bucket: Bucket) -> None:
        model = bucket.model
        if model.config != self.config:
            model.reconfigure(self.config)
        for payloads in self.frames:  # as BucketProcessor._apply_rows applied them
            apply_frame(model, ordered_events(payloads, model)[0], BatchChanges(track=False))
        model.take_forgotten()  # the tombstones were written by the batch itself
        _restore_header(bucket, self.header)


# --- serialisation ---------------------------------------------------------------------------


def _slots_reducer(cls: type) -> Any:
    names = [f.name for f in fields(cls)]
    getter = operator.attrgetter(*names)

    def reduce(obj: Any) -> tuple[type, tuple[Any, ...]]:
        return (cls, getter(obj))

    return reduce


_DISPATCH = {
    cls: _slots_reducer(cls)
    for cls in (
        PartitionState, ReplicaState, OpenCondition, TopicState, BrokerState, Bucket, Delta, Replay,
    )
}  # fmt: skip

# -- a bucket's partitions, packed --------------------------------------------------------------
#
# Most partitions of a bucket are steady: no open condition, no election being judged. Their
# states are scalars, tuples of scalars and a few small containers: each is pickled as one
# flat list (its replicas as tuples, its LEO history as bytes) and rebuilt by one call.
# Pickled object by object -- a reducer call per state, replica and epoch -- a bucket cost
# ~12.5 us a partition to write (a batch that touches a whole bucket writes it whole), now
# ~7.5; and the flat lists compress better (37 -> ~27 B a partition). The others (and
# forgotten ones, None in a delta) are pickled as they are, in their place.

_PS = tuple(f.name for f in fields(PartitionState))
_RS = tuple(f.name for f in fields(ReplicaState))
_PS_GET = operator.attrgetter(*_PS)
_RS_GET = operator.attrgetter(*_RS)
_AT_REPLICAS, _AT_LINEAGE = _PS.index("replica_states"), _PS.index("lineage")
_AT_LEOS, _AT_OPEN = _PS.index("leader_leos"), _PS.index("open")
#: The stamps (ms) of a partition's and of a replica's state. A bucket's partitions share a
#: few hundred distinct values (a collector's rounds), but unpickled each is its own 32-byte
#: int: :func:`_unpack` keeps one object per value (~380 B a partition).
_PS_STAMPS = tuple(
    i for i, name in enumerate(_PS) if name.endswith("_at") or name in ("last_seen", "leos_base_t")
)
#: The names and replica sets of a partition's state: the same few values across a bucket
#: (a cluster, its topics, its brokers' combinations). The flat lists are pickled without a
#: memo (:func:`_reduce_packed`), so each would be read back as its own object:
#: :func:`_unpack` keeps one per value, as for the stamps (~450 B a partition).
_PS_SHARED = tuple(
    _PS.index(name)
    for name in (
        "cluster", "topic", "topic_id", "retired_topic_ids", "replicas", "adding_replicas",
        "removing_replicas", "isr", "prev_isr", "eligible_leader_replicas", "offline_replicas",
        "election_times",
    )
)  # fmt: skip


class _Packed:
    """A partitions dict to pickle packed (:func:`_unpack` reads it back as the dict)."""

    __slots__ = ("partitions",)

    def __init__(self, partitions: Mapping[tuple[str, str, int], PartitionState | None]) -> None:
        self.partitions = partitions


def _reduce_packed(p: _Packed) -> tuple[Any, tuple[bytes, list[Any]]]:
    flat, others = flatten(p.partitions)
    return (_unpack, (pickle_flat(flat), others))


def flatten(
    partitions: Mapping[tuple[str, str, int], PartitionState | None],
) -> tuple[list[Any], list[tuple[tuple[str, str, int], PartitionState | None]]]:
    """The steady partitions as flat lists of builtins, in order; each other one (an open
    condition, an election being judged, forgotten: None) as ``None`` in its place and
    ``(key, state)`` in the second list, to be pickled as it is."""
    flat: list[Any] = []
    others: list[tuple[tuple[str, str, int], PartitionState | None]] = []
    for key, ps in partitions.items():
        if ps is None or ps.open or ps.election is not None:
            flat.append(None)  # its place: the next of ``others``
            others.append((key, ps))
            continue
        v = list(_PS_GET(ps))
        v[_AT_REPLICAS] = tuple([(b, _RS_GET(r)) for b, r in ps.replica_states.items()])
        v[_AT_LINEAGE] = tuple([tuple(e) for e in ps.lineage])
        leos = ps.leader_leos  # int32 as bytes (int64 -- rare -- as the array)
        v[_AT_LEOS] = leos.tobytes() if leos.itemsize == 4 else leos
        v[_AT_OPEN] = None
        flat.append(v)
    return flat, others


def pickle_flat(flat: list[Any]) -> bytes:
    """:func:`flatten`'s lists pickled without a memo."""
    # The flat lists pickled on their own, without a memo (the pickler's ``fast`` mode): a
    # memo entry for each list and replica tuple, only to find that none is shared, cost a
    # quarter of writing a bucket (15.6k steady partitions, one process, GC off as in a
    # batch: 7.8 -> 6.2 us a partition). They hold no cycle (the pickler would refuse one:
    # ``ValueError``, never a wrong blob) and nothing whose identity matters: the values
    # that many partitions share, :func:`_unpack` shares again. The other states keep the
    # memo (their conditions' details share keys and values).
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=5)
    pickler.fast = True
    pickler.dump(flat)
    return buf.getvalue()


def _unpack(
    flat: bytes | list[Any], others: list[tuple[tuple[str, str, int], PartitionState | None]]
) -> dict[tuple[str, str, int], PartitionState | None]:
    """The partitions dict :func:`_reduce_packed` packed (``flat``: the flat lists pickled;
    a list of them as stored before they were pickled apart)."""
    rows: list[Any] = pickle.loads(flat) if isinstance(flat, bytes) else flat
    out: dict[tuple[str, str, int], PartitionState | None] = {}
    rest = iter(others)
    replica, entry = ReplicaState, tuple.__new__
    same: Any = {}.setdefault  # one object per value of a stamp, a name, a replica set
    for v in rows:
        if v is None:
            key, other = next(rest)
            out[key] = other
            continue
        for i in _PS_STAMPS:
            v[i] = same(v[i], v[i])
        for i in _PS_SHARED:
            v[i] = same(v[i], v[i])
        replicas = {}
        for b, r in v[_AT_REPLICAS]:
            rs = replicas[b] = replica(*r)
            # a replica's two stamps that change every round (suspect_at is mostly -1)
            rs.observed_at = same(rs.observed_at, rs.observed_at)
            rs.caught_up_at = same(rs.caught_up_at, rs.caught_up_at)
            rs.last_truncation = same(rs.last_truncation, rs.last_truncation)
        v[_AT_REPLICAS] = replicas
        v[_AT_LINEAGE] = [entry(EpochEntry, e) for e in v[_AT_LINEAGE]]
        leos = v[_AT_LEOS]
        v[_AT_LEOS] = array("i", leos) if leos.__class__ is bytes else leos
        v[_AT_OPEN] = {}
        out[(v[0], v[1], v[2])] = PartitionState(*v)
    return out


def _reduce_model(m: ClusterModel) -> tuple[Any, tuple[Any, ...]]:
    state = dict(m.__dict__)
    state["partitions"] = _Packed(m.partitions)
    state["_contexts"] = {}  # derived: rebuilt on use
    return (_model_from, (type(m), state))


def _model_from(cls: type[ClusterModel], state: dict[str, Any]) -> ClusterModel:
    m = cls.__new__(cls)
    m.__setstate__(state)
    return m


def _reduce_delta(d: Delta) -> tuple[Any, tuple[Any, ...]]:
    return (Delta, (d.header, _Packed(d.partitions), d.topics, d.brokers, d.renewed))


#: What the pickler is given: the dataclasses' reducers, and the packed partitions of a
#: bucket's model and of a delta.
_TABLE: dict[Any, Any] = {
    **_DISPATCH,
    # A metadata read a partition holds (``PartitionState.pending_meta``): copyreg's
    # reducer (its fields, in order), which the table replaces.
    PartitionMeta: copyreg.dispatch_table[PartitionMeta],
    _Packed: _reduce_packed,
    ClusterModel: _reduce_model,
    Delta: _reduce_delta,
}


#: How a bucket's snapshot and deltas are stored: pickled (protocol 5, the reducers above;
#: steady partitions packed as flat lists), then compressed with zstd at level 1
#: (:func:`_compress`) -- the bytes every batch moves through the state API's socket,
#: RocksDB and the checkpoint's changelog. A delta is the states a batch changed
#: (:class:`Delta`) or the batch's input (:class:`Replay`). zstd-1 against the zlib-1 of
#: before (``bench.state_codec_bench``, one bucket of 15k partitions; docs/benchmarks.md):
#: a batch's input compressed in 0.19x the CPU, read back in 0.21x, to 0.36x the bytes; a
#: snapshot's pickle 0.25x, 0.32x, ~0.7x.
STATE_ENCODING = "pickle-5+flat-steady+zstd-1+replay"

#: The codec (pyarrow's zstd: the Python workers hold pyarrow already, for Arrow).
_ZSTD = pa.Codec("zstd", compression_level=1)
#: A stored blob: the pickle's size (what zstd's decoder is told to expect), then the frame.
_SIZE = struct.Struct("<Q")


def _compress(raw: Any) -> bytes:
    """``raw`` (bytes-like) as stored: its length, then its zstd-1 frame."""
    frame: bytes = _ZSTD.compress(raw, asbytes=True)
    return _SIZE.pack(len(raw)) + frame


def _decompress(blob: bytes) -> bytes:
    """What :func:`_compress` stored."""
    (size,) = _SIZE.unpack_from(blob)
    out: bytes = _ZSTD.decompress(memoryview(blob)[_SIZE.size :], size, asbytes=True)
    return out


def state_fingerprint(classes: tuple[type, ...] | None = None) -> str:
    """What the stored state's encoding (:data:`STATE_ENCODING`) and shape depend on: every
    stored class's field names, in order (the reducers above store them positionally) --
    12 hex digits.

    A checkpoint records it (``monitor-layout.json``); the job refuses one written with
    another, as unpickling it would hand fields to the wrong names or fail mid-batch.
    ``classes``: the stored classes (default: the model's).
    """
    from monitor.model.state import ElectionCheck, TopicConfig

    shape = [
        (cls.__name__, [f.name for f in fields(cls)])
        for cls in classes or (*_DISPATCH, ElectionCheck, TopicConfig)
    ]
    shape.append((EpochEntry.__name__, list(EpochEntry._fields)))
    shape.append((STATE_ENCODING, []))
    return zlib.crc32(json.dumps(shape).encode()).to_bytes(4, "big").hex() + f"{len(shape):04x}"


def dumps(obj: Bucket | Delta | Replay) -> bytes:
    """A bucket or delta as stored (:data:`STATE_ENCODING`); the model's dataclasses are
    reduced to constructor arguments."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=5)
    pickler.dispatch_table = _TABLE
    pickler.dump(obj)
    return _compress(buf.getbuffer())


def loads(blob: bytes) -> Bucket:
    value = pickle.loads(_decompress(blob))
    if not isinstance(value, Bucket):
        raise TypeError(f"state holds {type(value).__name__}, not a Bucket")
    return value


def loads_delta(blob: bytes) -> Delta | Replay:
    value = pickle.loads(_decompress(blob))
    if not isinstance(value, Delta | Replay):
        raise TypeError(f"state holds {type(value).__name__}, not a Delta")
    return value


# --- building model events from the packed payloads ------------------------------------------


#: The Python type of each of the contract's scalar kinds (``streaming.schema.Scalar``).
_PY_SCALARS: dict[str, type] = {"int": int, "str": str, "bool": bool}


def _wire_type(rule: FieldRule) -> Any:
    """The type a body member decodes as, from the contract's rule for its field (the one
    the Spark schema is derived from): its constraints left out (the JVM checked them),
    arrays as tuples (what the model holds), a nested model's items -- a round record's
    samples -- as arrays of their values in field order, any value possibly null."""
    s = rule.scalar
    if s.kind == "model":
        item: Any = tuple.__class_getitem__(tuple(_wire_type(f) | None for f in s.fields))
    elif s.kind == "literal":
        item = type(s.literals[0])
    else:
        item = _PY_SCALARS[s.kind]
    return tuple[item, ...] if rule.is_list else item


def _body_struct(kind: str) -> type[msgspec.Struct]:
    """What a body of ``kind`` decodes into: a struct of its members in constructor order
    (the samples last, for a partition), tagged by the kind's code."""
    rules = {r.name: r for r in RULES[kind]}
    fields_ = [*BODY_FIELDS[kind], *(["replica_samples"] if kind == "partition" else [])]
    members = [
        (name, _wire_type(rules[f]) | None, None)
        for f, name in zip(fields_, BODY_NAMES, strict=False)
    ]
    return msgspec.defstruct(
        f"{kind}_body", members, tag_field=BODY_KIND, tag=KIND_CODES[kind], gc=False
    )


#: Body struct -> the model event it becomes (partition bodies: :func:`ordered_events`).
_BODIES: dict[type[msgspec.Struct], type] = {
    _body_struct(k): cls for k, cls in MODEL_CLASSES.items()
}
_PARTITION_BODY = next(b for b, cls in _BODIES.items() if cls is PartitionMeta)
#: Every body of a batch, decoded at once (msgspec: C speed, arrays straight to tuples;
#: against ``json.loads`` to dicts: ``bench.operator_bench --compare-decode``).
_DECODER = msgspec.json.Decoder(list[functools.reduce(operator.or_, _BODIES)])  # type: ignore[misc]


@dataclass(slots=True)
class Refused:
    """A record this bucket owns that the contract refuses: its dead letter's makings."""

    src_partition: int
    src_offset: int
    src_topic: str
    raw: str
    reason: str


def _stamp_reason(rec: Any, kafka_ts: int, limit: int) -> str | None:
    """The reason to refuse a record stamped further ahead of its Kafka record than
    ``limit`` (:mod:`monitor.model.stamps`), else None."""
    at = rec.meta.observed_at if type(rec) is PartitionRound else rec.observed_at
    if stamps.believed(at, kafka_ts, limit):
        return None
    return stamps.REASON.format(
        at=at,
        ahead=at - kafka_ts,
        reference_is="its Kafka record's timestamp",
        reference=kafka_ts,
        limit=limit,
    )


#: The contract's kind of each model record class.
_KIND_OF_MODEL: dict[type, str] = {cls: kind for kind, cls in MODEL_CLASSES.items()}


def _key_reason(rec: Any, key: str) -> str | None:
    """The reason to refuse a record routed by its Kafka ``key`` that is not that
    partition's (it went to the key's bucket, not its own), else None."""
    kind = type(rec)
    m = rec.meta if kind is PartitionRound else rec
    if kind is PartitionRound or kind is PartitionMeta or kind is ReplicaReport:
        if partition_key(m.cluster, m.topic, m.partition) == key:
            return None
        what = f"of partition {shown(m.topic)} {m.partition} of cluster {shown(m.cluster)}"
    else:
        what = f"a {_KIND_OF_MODEL.get(kind, kind.__name__)} event"
    return f"Kafka key: {shown(key)} is a partition's key; the record is {what}"


def ordered_events(
    payloads: list[str], model: ClusterModel | None = None
) -> tuple[list[Any], int, int, int, list[Refused]]:
    """What to apply to the model, in its one order (:func:`monitor.model.order.application_order`):
    events sorted by (observed_at, kind order, source order), a round record applied whole
    where nothing sorts among its events, else unfolded (its samples at their own stamps,
    then its metadata); exact duplicates out.

    A record's payload carries the record itself, read and validated here
    (:func:`streaming.records.read_record`); one the contract refuses, or stamped too far
    ahead of its Kafka record (the model's ``max_stamp_ahead_ms``), is not applied, and if
    this bucket owns it, returned as refused. Bodies of the form before (a stored
    :class:`Replay`'s) are read as they were.

    ``model``: the bucket's, whose topics' settings say which ``topic_config`` events change
    nothing for a round. Returns (records and events to apply, duplicates dropped, events
    this bucket owns for counting -- accepted ones, duplicates included --, the newest stamp
    among them, the refused records).
    """
    seen: set[str] = set()
    records: list[tuple[tuple[int, int], Any]] = []
    refused: list[Refused] = []
    coords: list[tuple[int, int]] = []
    bodies: list[str] = []
    dups = owned = 0
    newest = -1
    limit = model.config.max_stamp_ahead_ms if model is not None else None
    read, round_ = read_record, PartitionRound
    for p in payloads:
        parts = p.split(SEP, 5)
        if len(parts) == 4:  # a body of the form before (it holds no SEP: JSON escapes it)
            sp, so, owner, body = parts
            owned += owner == "t"
            if body in seen:
                dups += 1
                continue
            seen.add(body)
            coords.append((int(sp), int(so)))
            bodies.append(body)
            continue
        sp, so, owner, st, ts, raw = parts
        keyed = owner[:1] == RECORD_KEYED
        mine = keyed or owner == RECORD_OWNER
        if raw in seen:
            dups += 1
            owned += mine
            continue
        seen.add(raw)
        try:
            rec = read(raw)
            why = _key_reason(rec, owner[1:]) if keyed else None
            if why is None and ts and limit is not None:
                why = _stamp_reason(rec, int(ts), limit)
        except EventError as e:
            why = str(e)
        if why is not None:
            if mine:  # its dead letter; not counted as an event
                refused.append(Refused(int(sp), int(so), st, raw, why))
            # Not a duplicate's original: the same text under another key or Kafka
            # timestamp may be accepted.
            seen.discard(raw)
            continue
        owned += mine
        if type(rec) is round_:
            at = rec.meta.observed_at
            for r in rec.samples:
                if r.observed_at > at:
                    at = r.observed_at
        else:
            at = rec.observed_at
        if at > newest:
            newest = at
        records.append(((int(sp), int(so)), rec))
    if bodies:
        newest = max(newest, _read_bodies(coords, bodies, records))
    if model is None:
        return application_order(records), dups, owned, newest, refused
    ordered = application_order(records, model.topics, model.deleted)
    return ordered, dups, owned, newest, refused


def _read_bodies(coords: list[tuple[int, int]], bodies: list[str], records: list[Any]) -> int:
    """Bodies of the form before (the JVM's packed values, in a stored :class:`Replay`):
    their records appended to ``records``; the newest stamp among them."""
    newest = -1
    makers, p_body, astuple = _BODIES, _PARTITION_BODY, msgspec.structs.astuple
    report, meta_ = ReplicaReport, PartitionMeta
    for src, d in zip(coords, _DECODER.decode("[" + ",".join(bodies) + "]"), strict=True):
        if type(d) is not p_body:
            ev = makers[type(d)](*astuple(d))
            records.append((src, ev))
            if ev.observed_at > newest:
                newest = ev.observed_at
            continue
        # fmt: off
        c, at, topic, part, leader, epoch, rs, isr, off, elr, hw, lso, eso, tid, add, rm, sam = (
            astuple(d))
        ev = meta_(c, at, topic, part, leader, epoch, rs or (), isr or (), off or (), elr, hw,
                   lso, eso, tid, add, rm)
        # fmt: on
        if at > newest:
            newest = at
        if not sam:
            records.append((src, ev))
            continue
        reports = []
        for b, leo, s_lso, s_hw, lag, s_at in sam:
            if s_at is None:
                s_at = at
            elif s_at > newest:
                newest = s_at
            reports.append(report(c, s_at, topic, part, b, leo, s_lso, s_hw, lag))
        records.append((src, PartitionRound(ev, tuple(reports))))
    return newest


def _unrouted_reason(raw: bytes) -> str:
    """Why a record the JVM could not route is dead: pydantic's reason -- or, for a record
    pydantic accepts that Spark's JSON reader could not route, that."""
    try:
        parse_event(raw)
    except EventError as e:
        return str(e)
    return (
        "not routed: Spark's JSON reader could not read its kind, cluster, topic, partition "
        "or broker (streaming.job.ROUTING_DDL), though the contract accepts the record"
    )


# --- the state rows (what the runbook CLI and exporter read) -------------------------------------


# --- the processor ---------------------------------------------------------------------------


class _Profile:
    """Where a bucket's time goes (``MONITOR_STREAMING_PROFILE=<file>`` appends a line:
    the bucket, the micro-batch's instant ``at``, the records applied, then each phase's
    wall milliseconds; the load phase is named by how the load went, e.g. ``load_hit``).
    ``bench.spark_bench`` sums the lines of the sustained batches."""

    def __init__(self, bucket: int, at: int) -> None:
        import os
        import time

        self.path = os.environ.get("MONITOR_STREAMING_PROFILE")
        self.clock = time.perf_counter
        self.bucket = bucket
        self.at = at
        self.last = self.clock()
        self.parts: dict[str, float] = {}

    def mark(self, name: str) -> None:
        if self.path:
            now = self.clock()
            self.parts[name] = self.parts.get(name, 0.0) + now - self.last
            self.last = now

    def done(self, events: int) -> None:
        if self.path:
            parts = " ".join(f"{k}={v * 1000:.0f}" for k, v in self.parts.items())
            with open(self.path, "a") as fh:
                fh.write(f"bucket={self.bucket} at={self.at} events={events} {parts}\n")


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic GC off while a batch runs, and what the batch leaves alive frozen.

    A worker holds its buckets' models (millions of objects); decoding a batch allocates
    hundreds of thousands of short-lived containers, and the collections they trigger
    traverse the live heap again and again: measured, half of the decode time. The model
    creates no reference cycles per event; collection resumes after the batch.

    And after it, ``gc.freeze()``: the objects alive then (the models) move to the
    collector's permanent generation, which it never traverses. Without it, the first
    allocation after the batch triggered a full collection over the whole heap whenever
    the batch's survivors passed a quarter of it -- at a million partitions, a fifth of
    the Python workers' time (py-spy). Reference counting still frees what a later batch
    replaces (the model holds no cycles); only garbage cycles among frozen objects would
    stay, and the model makes none.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


#: Worker-process cache: (scope, bucket) -> (version (seq, tag), Bucket).
_CACHE: dict[tuple[str, int], tuple[tuple[int, str], Bucket]] = {}

#: Schemas of the state variables (see :class:`BucketStore`).
META_SCHEMA = (
    "seq long, tag string, base_seq long, base_tag string, log_start long, "
    "base_bytes long, delta_bytes long, replay_bytes long"
)
BASE_SCHEMA = "blob binary"
DELTA_KEY_SCHEMA = "seq long"
DELTA_SCHEMA = "tag string, prev string, blob binary"

#: Deltas kept below the snapshot, so that a worker whose cache is a few batches behind
#: catches up instead of reloading the whole bucket.
KEEP_DELTAS = 16
#: Beyond this many missing deltas a worker reloads the snapshot instead of catching up.
MAX_CATCH_UP = 32
#: A new snapshot after this many deltas at the latest.
MAX_DELTAS = 64
#: A batch that changed at least this share of a bucket's partitions writes a snapshot, not
#: a delta (:meth:`BucketStore.save`): NUM / DEN. At 1M partitions, batches of a million
#: records cut rounds anywhere, and a worker whose cache was behind loaded a snapshot plus
#: deltas of ~90% of it (py-spy: a quarter of the Python workers' time in loads).
SNAPSHOT_SHARE_NUM, SNAPSHOT_SHARE_DEN = 1, 2
#: Such a batch is stored as its input (:class:`Replay`) instead, while fewer than
#: ``OperatorSettings.replay_batches`` deltas follow the snapshot: a load that misses the
#: cache applies at most that many batches again after reading the snapshot (~24 us a
#: partition for each, ``bench.operator_bench``) -- and only while the
#: bucket's last this many loads all found it in the worker's cache (``Bucket.extra
#: ["misses"]``, a bit per load): where its tasks change workers (``local`` mode's Python
#: workers are taken in turn), every miss would apply batches again.
REPLAY_AFTER_HITS = 8


@dataclass(slots=True)
class Meta:
    """The version row of a bucket: where its snapshot and delta log stand."""

    seq: int = 0
    tag: str = ""
    base_seq: int = 0
    base_tag: str = ""
    log_start: int = 1
    base_bytes: int = 0
    delta_bytes: int = 0
    #: Of ``delta_bytes``, those of stored inputs (:class:`Replay`): bounded by their number
    #: (``replay_batches``), not counted against the snapshot's size for compaction.
    replay_bytes: int = 0

    @classmethod
    def of(cls, row: Any) -> Meta:
        return cls(
            int(row[0]), str(row[1]), int(row[2]), str(row[3]), int(row[4]), int(row[5]),
            int(row[6]), int(row[7]),
        )  # fmt: skip

    def row(self) -> tuple[Any, ...]:
        return (
            self.seq, self.tag, self.base_seq, self.base_tag, self.log_start, self.base_bytes,
            self.delta_bytes, self.replay_bytes,
        )  # fmt: skip


class BucketStore:
    """A bucket's state in Spark: a snapshot plus a log of deltas, behind a worker cache.

    Three state variables per bucket (key):

    * ``meta`` — ValueState :data:`META_SCHEMA`: the version (``seq``, random ``tag``), the
      snapshot's version, the oldest delta kept, byte counts;
    * ``base`` — ValueState: the whole :class:`Bucket` pickled at version ``base_seq``;
    * ``deltas`` — MapState ``seq -> (tag, prev, blob)``: delta ``seq`` turns version
      ``(seq - 1, prev)`` into ``(seq, tag)``; the blob is a pickled :class:`Delta` of the
      states the batch changed, or the batch's input (:class:`Replay`).

    A batch writes one delta (cost proportional to what it touched, not to the bucket's
    size) and, when the deltas since the snapshot outgrow it (``compact_factor`` x its size,
    staggered per bucket so that buckets do not compact in the same batch) or number
    :data:`MAX_DELTAS`, a new snapshot. A batch that changed most of the bucket writes its
    input (:class:`Replay`: a bucket whose last :data:`REPLAY_AFTER_HITS` loads hit the
    cache, fewer than ``settings.replay_batches`` deltas after the snapshot) or a snapshot.
    Reading: a worker that holds the current version in its cache reads only ``meta``; one
    that is behind (the bucket ran on the other worker) applies the missing deltas, checking
    the tag chain; anything else — no cache entry, a different history (task retry, restart
    from the checkpoint), a broken chain — loads the snapshot and the deltas after it.
    Correctness never depends on the cache.
    """

    def __init__(
        self, meta: Any, base: Any, deltas: Any, scope: str, bucket: int, settings: Any
    ) -> None:
        self.meta_state = meta
        self.base = base
        self.deltas = deltas
        self.key = (scope, bucket)
        self.bucket = bucket
        self.settings = settings
        self.meta: Meta | None = None
        #: 1.5x .. 2.4x: buckets filling at the same rate compact in different batches.
        self.compact_factor = 1.5 + (bucket % 8) / 8
        #: How the last load went: "new", "hit", "catch_up", "full" (no cache entry) or
        #: "stale" (a cache entry of another history, or too far behind).
        self.loaded = ""
        #: What the last save wrote: "snapshot", "delta" or "replay" (the batch's input).
        self.saved = ""

    # -- reading -------------------------------------------------------------------------
    def load(self) -> Bucket:
        cached = _CACHE.pop(self.key, None)  # popped: a failure mid-batch leaves no entry
        row = self.meta_state.get()
        if row is None:
            self.meta = None
            self.loaded = "new"
            owns = OwnsGlobal(self.bucket, self.settings.buckets)
            return Bucket(ClusterModel(self.settings.model, owns))
        meta = self.meta = Meta.of(row)
        if cached is not None:
            (seq, tag), state = cached
            if seq == meta.seq and tag == meta.tag:
                self.loaded = "hit"
                return state
            behind = seq < meta.seq <= seq + MAX_CATCH_UP and seq >= meta.log_start - 1
            if behind and self._catch_up(state, seq, tag, meta):
                self.loaded = "catch_up"
                return state
        self.loaded = "full" if cached is None else "stale"
        return self._load_stored(meta)

    def _catch_up(self, state: Bucket, seq: int, tag: str, meta: Meta) -> bool:
        for s in range(seq + 1, meta.seq + 1):
            row = self.deltas.getValue((s,))
            if row is None or row[1] != tag:
                return False  # another history: the caller reloads (state is discarded)
            loads_delta(bytes(row[2])).apply_to(state)
            tag = str(row[0])
        return tag == meta.tag

    def _load_stored(self, meta: Meta) -> Bucket:
        row = self.base.get()
        if row is None:
            raise RuntimeError(f"bucket {self.bucket}: version {meta.seq} without a snapshot")
        state = loads(bytes(row[0]))
        tag = meta.base_tag
        for s in range(meta.base_seq + 1, meta.seq + 1):
            d = self.deltas.getValue((s,))
            if d is None or d[1] != tag:
                raise RuntimeError(f"bucket {self.bucket}: delta {s} missing or out of chain")
            loads_delta(bytes(d[2])).apply_to(state)
            tag = str(d[0])
        if tag != meta.tag:
            raise RuntimeError(f"bucket {self.bucket}: delta log ends at the wrong version")
        return state

    # -- writing -------------------------------------------------------------------------
    def save(
        self,
        state: Bucket,
        partitions: dict[tuple[str, str, int], PartitionState | None],
        topics: dict[tuple[str, str], TopicState | None],
        inputs: list[list[str]] | None = None,
        renewed: tuple[tuple[str, str, int], ...] = (),
    ) -> int:
        """Write the batch's delta (and a snapshot when due); return the bytes stored.

        ``inputs``: the batch's payloads, per frame (None: a tick), for a :class:`Replay`;
        ``renewed``: :attr:`Delta.renewed`."""
        if state.model.deleted or "deleted" in state.extra:
            # The model's tombstones travel in the header (a delta carries no model field).
            state.extra["deleted"] = dict(state.model.deleted)
        old = self.meta
        tag = uuid.uuid4().hex
        most = len(partitions) * SNAPSHOT_SHARE_DEN >= len(state.model.partitions) * (
            SNAPSHOT_SHARE_NUM
        )
        if old is None:  # a new bucket: a snapshot, no delta (nobody can be behind)
            meta = Meta(seq=1, tag=tag, log_start=2)
            self._snapshot(state, meta)
            self.saved = "snapshot"
        elif (
            most
            and inputs is not None
            and old.seq - old.base_seq < self.settings.replay_batches
            and not state.extra.get("misses", 0)
        ):
            # The batch's input instead of the states it changed (most of the bucket).
            meta = self._append(old, tag, Replay(_header(state), state.model.config, inputs))
            self.saved = "replay"
        elif most:
            # The batch changed most partitions (a collection round of the whole bucket, or
            # most of one: batches need not end where rounds do): its delta would be about
            # the snapshot's size, and the delta log would be compacted into a snapshot
            # every other batch -- the bucket pickled twice -- while a worker behind would
            # load a snapshot and then deltas as big. The snapshot alone; the deltas below
            # it are obsolete (a worker behind reloads it).
            meta = Meta(old.seq + 1, tag, log_start=old.seq + 2)
            self._snapshot(state, meta)
            for seq in range(old.log_start, old.seq + 1):
                self.deltas.removeKey((seq,))
            self.saved = "snapshot"
        else:
            if renewed:
                # New keys are restored in the delta's order: the live model's, as a renewed
                # key came after ones first touched after it (rare: a topic deleted and
                # listed again in one batch, so the walk of the model is paid then only).
                live = state.model.partitions
                partitions = {k: partitions[k] for k in live if k in partitions} | {
                    k: None for k, v in partitions.items() if v is None
                }
            delta = Delta(_header(state), partitions, topics, dict(state.model.brokers), renewed)
            meta = self._append(old, tag, delta)
            self.saved = "delta"
            if (
                meta.delta_bytes - meta.replay_bytes > self.compact_factor * meta.base_bytes
                or meta.seq - meta.base_seq >= MAX_DELTAS
            ):
                self._snapshot(state, meta)
                self.saved = "snapshot"
                while meta.log_start <= meta.seq - KEEP_DELTAS:
                    self.deltas.removeKey((meta.log_start,))
                    meta.log_start += 1
        self.meta_state.update(meta.row())
        self.meta = meta
        _CACHE[self.key] = ((meta.seq, meta.tag), state)
        return meta.base_bytes + meta.delta_bytes

    def _append(self, old: Meta, tag: str, delta: Delta | Replay) -> Meta:
        """Write ``delta`` as the version after ``old``; return the new version row."""
        blob = dumps(delta)
        replay = len(blob) if isinstance(delta, Replay) else 0
        meta = Meta(
            old.seq + 1, tag, old.base_seq, old.base_tag, old.log_start, old.base_bytes,
            old.delta_bytes + len(blob), old.replay_bytes + replay,
        )  # fmt: skip
        self.deltas.updateValue((meta.seq,), (tag, old.tag, blob))
        return meta

    def _snapshot(self, state: Bucket, meta: Meta) -> None:
        blob = dumps(state)
        self.base.update((blob,))
        meta.base_seq, meta.base_tag = meta.seq, meta.tag
        meta.base_bytes, meta.delta_bytes, meta.replay_bytes = len(blob), 0, 0


@dataclass(frozen=True)
class OperatorSettings:
    """What the processor needs to know (picklable; shipped to the Python workers)."""

    buckets: int
    tick_ms: int
    catchup_slack_ms: int
    model: ModelConfig
    #: Separates the worker caches of two queries sharing a Python worker (tests, bench).
    cache_scope: str = ""
    emit_state: bool = True
    #: A touched partition's state row is written when its shape (``PartitionState.shape``)
    #: changed, and when its telemetry's time crossed one of its refresh instants, this
    #: many ms apart (:func:`monitor.model.batch.refresh_due`); 0: always.
    state_refresh_ms: int = 0
    #: A batch that changed most of a bucket is stored as its input (:class:`Replay`) while
    #: fewer than this many deltas follow the snapshot; 0: as the snapshot.
    replay_batches: int = 4


class Outputs:
    """Collects output rows column-wise (cheaper than a list of dicts)."""

    COLUMNS = tuple(c.split()[0] for c in OUTPUT_DDL.split(", "))

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {c: [] for c in self.COLUMNS}

    def add(self, **values: Any) -> None:
        for c in self.COLUMNS:
            self.cols[c].append(values.get(c))

    def dead_letter(
        self, bucket: int, topic: str, partition: int, offset: int, value: Any, reason: str
    ) -> None:
        """One dead letter: the record at ``topic``/``partition``/``offset`` (its bytes, none
        for a record too large) and why."""
        self.add(
            out="dead",
            key=f"{topic}/{partition}/{offset}",
            value=value,
            reason=reason,
            src_topic=topic,
            src_partition=partition,
            src_offset=offset,
            bucket=bucket,
        )

    def findings(self, bucket: int, findings: list[Finding]) -> None:
        for f in findings:
            d = f.to_dict()
            self.add(
                out="finding",
                key=f.subject_key,
                value=json.dumps(d, separators=(",", ":"), default=str).encode(),
                bucket=bucket,
            )

    def states(
        self,
        bucket: int,
        states: list[PartitionState],
        model: ClusterModel,
        seq: int,
        gone: Sequence[tuple[PartitionState, int]] = (),
    ) -> None:
        """One row per partition, and a tombstone (``deleted_at``: readers skip it) per
        forgotten one; ``seq`` orders a bucket's calls (see :func:`row_seq`)."""
        rows: Iterable[tuple[PartitionState, int | None]] = chain(
            ((ps, None) for ps in states), gone
        )
        keys: list[str] = []
        values: list[bytes] = []
        topics = model.topics
        for ps, deleted_at in rows:
            ts = topics.get((ps.cluster, ps.topic)) if deleted_at is None else None
            config = ts.config if ts is not None else None
            keys.append(f"{ps.cluster}/{ps.topic}/{ps.partition}")
            values.append(state_json(ps, config, deleted_at).encode())
        # Column by column (a row at a time through :meth:`add` was a third of the cost).
        n, cols = len(keys), self.cols
        given: dict[str, list[Any]] = {"out": ["state"] * n, "key": keys, "value": values}
        given |= {"bucket": [bucket] * n, "seq": [seq] * n}
        for c in self.COLUMNS:
            cols[c].extend(given.get(c) or [None] * n)

    def __len__(self) -> int:
        return len(self.cols["out"])

    def frame(self) -> Any:
        import pandas as pd  # type: ignore[import-untyped]

        return pd.DataFrame(self.cols, columns=list(self.COLUMNS))


def _forgotten(
    model: ClusterModel,
    partitions: dict[tuple[str, str, int], PartitionState | None],
    topics: dict[tuple[str, str], TopicState | None],
    renewed: list[tuple[str, str, int]] | None = None,
) -> list[tuple[PartitionState, int]]:
    """What the model forgot in this call (deleted topics): ``None`` in the delta's
    ``partitions`` and ``topics``; the partitions, for their tombstone rows. Into
    ``renewed``: those listed again since (:attr:`Delta.renewed`)."""
    gone, gone_topics = model.take_forgotten()
    # (a topic deleted and listed again in one call is a new history, not gone)
    if renewed is not None:
        renewed.extend(ps.key for ps, _ in gone if ps.key in model.partitions)
    gone = [(ps, at) for ps, at in gone if ps.key not in model.partitions]
    for ps, _ in gone:
        partitions[ps.key] = None
    for tk in gone_topics:
        if tk not in model.topics:
            topics[tk] = None
    return gone


def row_seq(state: Bucket) -> int:
    """Orders the state rows of one bucket: grows with every call of the processor.

    A micro-batch can write a partition twice -- from its events, then from the bucket's
    timer -- with the same ``updated_at`` (a tick does not change what was last seen). The
    store and the exporter keep the row with the highest ``(batch_id, row_seq)``. A call
    applies at least one event or one tick, so events + ticks grows strictly.
    """
    return state.events + state.ticks


#: ``touched`` markers for partitions whose row is written whatever its content: new in this
#: call, or re-judged under a changed topic configuration (the row carries its settings).
_NEW = ("new",)
_RECONFIGURED = ("reconfigured",)


@dataclass(slots=True)
class BatchChanges:
    """What a call's events changed, for its outputs (:func:`apply_frame` fills it)."""

    #: Whether a touched partition's row content is kept to compare after (state rows
    #: written only when they say something new).
    track: bool
    #: Each touched partition -> (its row content, its last_seen) before the call, or a
    #: marker (new, reconfigured).
    touched_keys: dict[tuple[str, str, int], Any] = field(default_factory=dict)
    topics: dict[tuple[str, str], TopicState | None] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)


def apply_frame(model: ClusterModel, events: list[Any], changes: BatchChanges) -> None:
    """Apply one input frame's events (in :func:`ordered_events`' order) to the bucket's
    model, noting what they touched. The one place a batch changes the model: a stored
    input (:class:`Replay`) is applied again through it. The loop is the compiled model's
    (:func:`monitor.model.batch.apply_noting`)."""
    partitions, topics = model.partitions, changes.topics
    touched_keys = changes.touched_keys

    def topic_config(ev: TopicConfigReport) -> list[Finding]:
        tk = (ev.cluster, ev.topic)
        was = model.topics.get(tk)
        config = was.config if was is not None else None
        found = model.apply(ev)
        ts = model.topics.get(tk)  # None: the topic is deleted
        if ts is not None:
            topics[tk] = ts
            if ts.config != config:  # the topic's partitions were re-judged
                for pk in partitions:
                    if pk[0] == tk[0] and pk[1] == tk[1]:
                        touched_keys[pk] = _RECONFIGURED
        return found

    # (not tracking, what a partition was is not read: every touched one is written)
    apply_noting(model, events, touched_keys, _NEW, topic_config, changes.findings)


def _bytes(v: Any) -> bytes:
    return bytes(v) if v is not None else b""


class BucketProcessor(StatefulProcessor):
    """The stateful processor of ``transformWithStateInPandas``: one bucket of partitions
    per grouping key, its model state in three state variables (:class:`BucketStore`).

    Input rows are applied in the model's event order (:func:`ordered_events`); a
    processing-time timer per bucket runs the model's time-driven checks; each call emits
    findings, touched partitions' state rows and a stats row (:class:`Outputs`). Rows of the
    dead bucket (records that failed validation) come out as dead letters.
    """

    def __init__(self, settings: OperatorSettings) -> None:
        super().__init__()
        self.settings = settings
        self.index_of = bucket_index(settings.buckets)

    def _index(self, key: int) -> int:
        """The bucket index of a grouping key (:func:`bucket_keys`); the dead bucket as is."""
        return key if key == DEAD_BUCKET else self.index_of[key]

    def init(self, handle: Any) -> None:
        self.handle = handle
        #: How each load of this processor went (tests, profile).
        self.loaded: list[str] = []
        self.vars = (
            handle.getValueState("meta", META_SCHEMA),
            handle.getValueState("base", BASE_SCHEMA),
            handle.getMapState("deltas", DELTA_KEY_SCHEMA, DELTA_SCHEMA),
        )

    def _store(self, bucket: int) -> BucketStore:
        return BucketStore(*self.vars, self.settings.cache_scope, bucket, self.settings)

    def _load(self, store: BucketStore) -> Bucket:
        state = store.load()
        self.loaded.append(store.loaded)
        if store.loaded != "new":  # a bit per load: 1 when it missed the cache
            recent = state.extra.get("misses", 0) << 1 | (store.loaded != "hit")
            state.extra["misses"] = recent & ((1 << REPLAY_AFTER_HITS) - 1)
        # The thresholds are the job's settings, not the checkpoint's: a restart with new
        # settings judges with them (and a model pickled before a setting existed gets it).
        try:
            same = state.model.config == self.settings.model
        except AttributeError:
            same = False
        if not same:
            state.model.reconfigure(self.settings.model)
        return state

    def _ensure_timer(self, state: Bucket, now: int) -> None:
        if state.timer_at < 0:
            state.timer_at = now + self.settings.tick_ms
            self.handle.registerTimer(state.timer_at)

    # -- input -----------------------------------------------------------------------
    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Iterator[Any]:
        bucket = self._index(int(key[0]))
        out = Outputs()
        if bucket == DEAD_BUCKET:
            for pdf in rows:
                # payload: src_partition, src_offset, owner, source topic, reason
                for v, p in zip(pdf["value"].tolist(), pdf["payload"].tolist(), strict=True):
                    sp, so, _, st, r = p.split(SEP, 4)
                    # No reason from the JVM: a record it could not route; pydantic's reason.
                    r = r or _unrouted_reason(_bytes(v))
                    out.dead_letter(bucket, st, int(sp), int(so), _bytes(v), r)
            yield out.frame()
            return
        now = int(timerValues.getCurrentProcessingTimeInMs())
        with _no_gc():
            frame = self._apply_rows(bucket, rows, now)
        yield frame

    def _apply_rows(self, bucket: int, rows: Any, now: int) -> Any:
        out = Outputs()
        prof = _Profile(bucket, now)
        store = self._store(bucket)
        state = self._load(store)
        prof.mark(f"load_{store.loaded}")
        model = state.model
        n_events = n_dup = n_owned = 0
        touched: dict[tuple[str, str, int], PartitionState | None] = {}
        changes = BatchChanges(self.settings.emit_state and self.settings.state_refresh_ms > 0)
        touched_keys, topics, findings = changes.touched_keys, changes.topics, changes.findings
        max_obs = state.input_max_observed if state.input_batch_ts == now else -1
        inputs: list[list[str]] = []
        for pdf in rows:
            prof.mark("arrow")
            payloads = pdf["payload"].tolist()
            inputs.append(payloads)
            prof.mark("tolist")
            events, dups, owned, newest_event, refused = ordered_events(payloads, model)
            prof.mark("order")
            for f in refused:
                out.dead_letter(
                    bucket, f.src_topic, f.src_partition, f.src_offset, f.raw.encode(), f.reason
                )
            n_dup += dups
            n_events += len(payloads)
            n_owned += owned
            apply_frame(model, events, changes)
            if newest_event > max_obs:
                max_obs = newest_event
        prof.mark("apply")
        # The touched partitions' states, in the order first touched (a partition whose
        # topic was deleted since is not in the model: _forgotten marks it below); the rows
        # to write; each cluster's newest telemetry applied (the exporter's freshness: an
        # idle partition's row is not written every batch).
        newest: dict[str, int] = {}
        period = self.settings.state_refresh_ms if changes.track else 0
        written = rows_to_write(model.partitions, touched_keys, period, touched, newest)
        prof.mark("rows")
        state.input_batch_ts, state.input_max_observed = now, max_obs
        state.events += n_events
        state.duplicates += n_dup
        self._ensure_timer(state, now)
        renewed: list[tuple[str, str, int]] = []
        gone = _forgotten(model, touched, topics, renewed)
        size = store.save(state, touched, topics, inputs, tuple(renewed))
        prof.mark(f"save_{store.saved}")
        out.findings(bucket, findings)
        if self.settings.emit_state:
            out.states(bucket, written, model, row_seq(state), gone)
        prof.mark("outputs")
        out.add(
            out="stats",
            bucket=bucket,
            value=json.dumps(newest, separators=(",", ":")).encode() if newest else None,
            n_events=n_owned,
            n_duplicates=n_dup,
            n_findings=len(findings),
            n_partitions=len(model.partitions),
            state_bytes=size,
            n_states=len(written) + len(gone) if self.settings.emit_state else 0,
        )
        frame = out.frame()
        prof.mark("frame")
        prof.done(n_events)
        return frame

    # -- time ----------------------------------------------------------------------
    def handleExpiredTimer(
        self, key: Any, timerValues: Any, expiredTimerInfo: Any
    ) -> Iterator[Any]:
        bucket = self._index(int(key[0]))
        out = Outputs()
        if bucket == DEAD_BUCKET:
            return
        now = int(timerValues.getCurrentProcessingTimeInMs())
        with _no_gc():
            self._tick(bucket, now, out)
        if len(out):
            yield out.frame()

    def _tick(self, bucket: int, now: int, out: Outputs) -> None:
        store = self._store(bucket)
        state = self._load(store)
        clock = now
        if state.input_batch_ts == now and state.input_max_observed >= 0:
            clock = min(now, state.input_max_observed + self.settings.catchup_slack_ms)
        model = state.model
        findings = model.tick(clock)
        state.ticks += 1
        state.timer_at = -1
        self._ensure_timer(state, now)
        # What a tick can change: conditions it opens or resolves (findings) and the
        # details of conditions that stay open.
        keys = {
            (f.cluster, f.topic, f.partition)
            for f in findings
            if f.topic is not None and f.partition is not None
        }
        changed: dict[tuple[str, str, int], PartitionState | None] = {
            k: ps for k, ps in model.partitions.items() if ps.open or k in keys
        }
        topics: dict[tuple[str, str], TopicState | None] = {}
        renewed: list[tuple[str, str, int]] = []
        gone = _forgotten(model, changed, topics, renewed)
        store.save(state, changed, topics, renewed=tuple(renewed))
        out.findings(bucket, findings)
        keys = {k for k in keys if k in model.partitions}
        if self.settings.emit_state and (keys or gone):
            out.states(bucket, [model.partitions[k] for k in keys], model, row_seq(state), gone)
            # (the sink counts state rows from stats rows; a tick's has no events)
            out.add(out="stats", bucket=bucket, n_events=0, n_states=len(keys) + len(gone))

    def close(self) -> None:
        pass


def make_processor(settings: OperatorSettings) -> BucketProcessor:
    """The processor for ``transformWithStateInPandas`` with these settings."""
    return BucketProcessor(settings)
