"""A partition's state as every stage outside the model sees it: one row, one view.

The model keeps its working state in :class:`~monitor.model.state.PartitionState` (with
its own short names: ``hw``, ``max_hw``, ``last_seen``). What leaves the model -- the state
rows the Spark job writes to the store, what the exporter serves, what the runbook CLI
reads back -- is :class:`PartitionView`, defined here once, in the store's vocabulary:

- :func:`view_of` builds it from the model's state (the only conversion from the model);
- :meth:`PartitionView.to_row` / :meth:`PartitionView.from_row` are its one row form (a
  JSON-compatible dict whose keys are the store's columns; ``details`` travel as JSON text);
- :func:`state_json` is ``json.dumps(view_of(...).to_row())``, written directly because the
  job emits one per touched partition per batch (a test keeps them equal);
- :data:`STATE_DDL` is the Spark schema of the row, derived from the dataclasses below, so
  a field added here is a column everywhere.

>>> from monitor.model.state import PartitionState
>>> v = view_of(PartitionState("c", "orders", 0, replicas=(1, 2), isr=(1,), leader=1), None)
>>> v.to_row()["isr"], PartitionView.from_row(v.to_row()) == v
([1], True)
"""

from __future__ import annotations

import functools
import json
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Annotated, Any, Union

from monitor.model.findings import Severity
from monitor.model.state import OpenCondition, PartitionState, TopicConfig

#: Kafka's 32-bit fields (partition numbers, broker ids, epochs): ``int`` in the Spark
#: schema; every other integer (offsets, milliseconds, counts) is a ``long``.
Int32 = Annotated[int, "int32"]


@dataclass(frozen=True, slots=True)
class ReplicaRow:
    """One replica as the model measured it."""

    broker: Int32
    #: Last accepted log end offset (-1 unknown) and when it was sampled (ms).
    leo: int
    #: Behind the leader in offsets and in time (0 when caught up).
    lag_offsets: int
    lag_ms: int
    #: When it last held everything the leader had (Kafka's lastCaughtUpTime), -1 unknown.
    caught_up_at: int
    observed_at: int
    in_isr: bool


@dataclass(frozen=True, slots=True)
class OpenFinding:
    """A condition that is open on the partition, with its latest numbers."""

    kind: str
    severity: Severity
    opened_at: int
    broker: Int32 | None
    details: dict[str, Any]


@dataclass(frozen=True, slots=True)
class EpochRow:
    """One leadership of the partition's lineage (``start_offset`` -1: not known)."""

    epoch: Int32
    start_offset: int
    leader: Int32 | None
    at: int


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One partition's state: a row of the store, a view for the exporter and the CLI."""

    cluster: str
    topic: str
    partition: Int32
    #: None while offline.
    leader: Int32 | None
    leader_epoch: Int32
    isr: tuple[Int32, ...]
    replicas: tuple[Int32, ...]
    #: The partition's HW as last reported (-1 unknown).
    high_watermark: int
    #: The highest HW seen committed (rebased after a reported loss).
    max_committed_hw: int
    leader_leo: int
    #: Leader LEO - HW (0 when either is unknown).
    uncommitted: int
    hw_lag_ms: int
    #: The topic's ``min.insync.replicas`` and unclean-election flag, when reported.
    min_isr: Int32 | None
    unclean_enabled: bool | None
    replica_states: tuple[ReplicaRow, ...]
    open_findings: tuple[OpenFinding, ...]
    #: The highest severity among the open findings (``info`` when none).
    severity: Severity
    lineage: tuple[EpochRow, ...]
    late_events: int
    duplicate_events: int
    #: The newest telemetry applied to the partition (ms).
    updated_at: int
    #: Set on a tombstone: when the partition was forgotten (its topic deleted). Readers
    #: skip a partition whose newest row is one; compaction drops it.
    deleted_at: int | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.cluster, self.topic, self.partition)

    def to_row(self, details_as_text: bool = True) -> dict[str, Any]:
        """The store row: JSON-compatible, severities as labels and a finding's ``details``
        as JSON text (the Spark schema's string) -- or as objects, for ``--json`` output."""
        return _to_row(self, details_as_text)  # type: ignore[no-any-return]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PartitionView:
        """From a store row (or its dict from Spark or DuckDB: lists, JSON details).

        Rows of older stores may lack ``min_isr``: the ISR conditions carry it.
        """
        view: PartitionView = _from_row(cls, row)
        if view.leader is not None and view.leader < 0:
            view = _replace(view, leader=None)  # older rows wrote an offline leader as -1
        if view.min_isr is None:
            for o in view.open_findings:
                if "min_isr" in o.details:
                    return _replace(view, min_isr=int(o.details["min_isr"]))
        return view


@dataclass(frozen=True, slots=True)
class BrokerView:
    """A broker as the exporter and the runbook see it: whether it answers the collector,
    and its open broker-level conditions (``stale_telemetry``)."""

    cluster: str
    broker: int
    alive: bool
    observed_at: int
    open: tuple[OpenFinding, ...] = ()


def open_finding(c: OpenCondition) -> OpenFinding:
    return OpenFinding(str(c.kind), c.severity, c.opened_at, c.broker, dict(c.details))


def view_of(
    ps: PartitionState, config: TopicConfig | None, deleted_at: int | None = None
) -> PartitionView:
    """The view of one partition's state (``config``: its topic's, when known; a tombstone
    with ``deleted_at``)."""
    isr = ps.isr
    return PartitionView(
        cluster=ps.cluster,
        topic=ps.topic,
        partition=ps.partition,
        leader=ps.leader,
        leader_epoch=ps.leader_epoch,
        isr=isr,
        replicas=ps.replicas,
        high_watermark=ps.hw,
        max_committed_hw=ps.max_hw,
        leader_leo=ps.leader_leo(),
        uncommitted=ps.uncommitted(),
        hw_lag_ms=ps.hw_lag_ms,
        min_isr=config.min_insync_replicas if config is not None else None,
        unclean_enabled=config.unclean_leader_election_enable if config is not None else None,
        replica_states=tuple(
            ReplicaRow(
                b, rs.leo, rs.lag_offsets, rs.lag_ms, rs.caught_up_at, rs.observed_at, b in isr
            )
            for b, rs in sorted(ps.replica_states.items())
        ),
        open_findings=tuple(open_finding(c) for c in ps.open.values()),
        severity=ps.severity(),
        lineage=tuple(EpochRow(e.epoch, e.start_offset, e.leader, e.at) for e in ps.lineage),
        late_events=ps.late_events,
        duplicate_events=ps.duplicate_events,
        updated_at=ps.last_seen,
        deleted_at=deleted_at,
    )


# --- the row as JSON text, fast ------------------------------------------------------------


def _jv(v: int | bool | None) -> str:
    """A JSON scalar (int, bool or null), as ``json.dumps`` writes it."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(int(v))


def _jints(xs: Any) -> str:
    return "[" + ",".join(map(str, xs)) + "]"


def state_json(
    ps: PartitionState, config: TopicConfig | None = None, deleted_at: int | None = None
) -> str:
    """``json.dumps(view_of(ps, config, deleted_at).to_row())`` (compact), built directly:
    ~4x faster.

    A batch emits one row per touched partition: through dicts and ``json.dumps`` that was
    ~20 us per row, as much as the model's own work for the partition's events.
    ``tests/contract/test_state.py`` checks the two agree.
    """
    name = json.dumps
    isr = ps.isr
    rs = ",".join(
        f'{{"broker":{b},"leo":{r.leo},"lag_offsets":{r.lag_offsets},"lag_ms":{r.lag_ms},'
        f'"caught_up_at":{r.caught_up_at},"observed_at":{r.observed_at},'
        f'"in_isr":{"true" if b in isr else "false"}}}'
        for b, r in sorted(ps.replica_states.items())
    )
    if ps.open:
        row = _to_row(tuple(open_finding(c) for c in ps.open.values()))
        opens = name(row, separators=(",", ":"), default=str)[1:-1]
        severity = ps.severity().label
    else:
        opens, severity = "", "info"
    lineage = ",".join(
        f'{{"epoch":{e.epoch},"start_offset":{e.start_offset},"leader":{_jv(e.leader)},'
        f'"at":{e.at}}}'
        for e in ps.lineage
    )
    min_isr = config.min_insync_replicas if config is not None else None
    unclean = config.unclean_leader_election_enable if config is not None else None
    return (
        f'{{"cluster":{name(ps.cluster)},"topic":{name(ps.topic)},"partition":{ps.partition},'
        f'"leader":{_jv(ps.leader)},"leader_epoch":{ps.leader_epoch},"isr":{_jints(isr)},'
        f'"replicas":{_jints(ps.replicas)},"high_watermark":{ps.hw},'
        f'"max_committed_hw":{ps.max_hw},"leader_leo":{ps.leader_leo()},'
        f'"uncommitted":{ps.uncommitted()},"hw_lag_ms":{ps.hw_lag_ms},'
        f'"min_isr":{_jv(min_isr)},"unclean_enabled":{_jv(unclean)},'
        f'"replica_states":[{rs}],"open_findings":[{opens}],"severity":"{severity}",'
        f'"lineage":[{lineage}],"late_events":{ps.late_events},'
        f'"duplicate_events":{ps.duplicate_events},"updated_at":{ps.last_seen},'
        f'"deleted_at":{_jv(deleted_at)}}}'
    )


# --- whether a row says something new ------------------------------------------------------

#: The row fields :func:`row_content` leaves out: the numbers that move with every round of
#: a partition under traffic (offsets, what they imply) and with the clock alone (stamps,
#: durations). A partition whose other fields did not move -- its leadership, ISR, replicas,
#: lineage, open conditions -- says nothing new in a row; these fields are refreshed now and
#: then (``streaming.operator``'s ``state_refresh_ms``). Every condition they can lead to is
#: an open condition, which writes the row every time.
REFRESHED_FIELDS = (
    "high_watermark",
    "max_committed_hw",
    "leader_leo",
    "uncommitted",
    "hw_lag_ms",
    "updated_at",
    "replica_states.leo",
    "replica_states.lag_offsets",
    "replica_states.lag_ms",
    "replica_states.caught_up_at",
    "replica_states.observed_at",
)


def row_content(ps: PartitionState) -> tuple[Any, ...] | None:
    """What :func:`state_json` would say of ``ps`` apart from :data:`REFRESHED_FIELDS` (and
    the topic's settings, which the caller tracks), as a comparable value: two states with
    equal contents give rows that differ in those fields at most. ``None`` while a
    condition is open: its details move, and such a row is always written.

    The state's own :meth:`~monitor.model.state.PartitionState.shape`, compiled with the
    model: 0.33 us a partition against 0.59 for this tuple built here (20k states of
    synthetic rounds, best of 7, one process, 2026-12-01), where building the row is ~4
    and storing it much more.
    ``tests/contract/test_state.py`` changes every field of a state, one at a time, and
    checks that whatever moves the row outside those fields moves this too.
    """
    return ps.shape()


# --- the row form, derived from the dataclasses ------------------------------------------------


def _to_row(obj: Any, details_as_text: bool = True) -> Any:
    if isinstance(obj, Severity):
        return obj.label
    if isinstance(obj, tuple):
        return [_to_row(x, details_as_text) for x in obj]
    if isinstance(obj, dict):
        return json.dumps(obj, separators=(",", ":"), default=str) if details_as_text else obj
    if hasattr(obj, "__dataclass_fields__"):
        return {f.name: _to_row(getattr(obj, f.name), details_as_text) for f in fields(obj)}
    return obj


def _from_row(cls: type, row: Mapping[str, Any]) -> Any:
    return cls(**{name: convert(row.get(name)) for name, convert in _plan(cls)})


@functools.cache
def _plan(cls: type) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """Each field of ``cls`` with the function that reads its row value (:func:`_converter`),
    made once per class: working the types out again for every value cost most of reading
    a store's rows."""
    hints = _hints(cls)
    return tuple((f.name, _converter(hints[f.name], f.name)) for f in fields(cls))


def _converter(tp: Any, name: str = "") -> Callable[[Any], Any]:
    """The function that reads a row value of type ``tp`` (field ``name``): ``None`` as the
    field allows (``None``, an empty tuple, or the NOT NULL column's value when missing:
    :data:`_ZERO_WHEN_MISSING`, :data:`_EMPTY`), lists as tuples, nested rows as their
    dataclass, severities by label, details from their JSON text, ints as ints."""
    tp, nullable = _unwrap(tp)
    if typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]  # Int32 -> int
    missing: Any
    if nullable:
        missing = None
    elif _is_tuple(tp):
        missing = ()
    else:
        missing = _ZERO_WHEN_MISSING.get(name, _EMPTY.get(tp))
    convert: Callable[[Any], Any]
    if _is_tuple(tp):
        item = _converter(typing.get_args(tp)[0])

        def convert(raw: Any) -> Any:
            return tuple(item(x) for x in raw)

    elif hasattr(tp, "__dataclass_fields__"):
        cls = tp

        def convert(raw: Any) -> Any:
            return _from_row(cls, raw if isinstance(raw, Mapping) else raw.asDict())

    elif tp is Severity:

        def convert(raw: Any) -> Any:
            return raw if isinstance(raw, Severity) else Severity.parse(str(raw))

    elif tp is dict or typing.get_origin(tp) is dict:
        convert = _details
    elif tp is int:
        convert = int
    else:
        convert = _as_is

    def read(raw: Any) -> Any:
        return missing if raw is None else convert(raw)

    return read


def _as_is(raw: Any) -> Any:
    return raw


#: A NOT NULL column that an old or synthetic row left out: offsets and times unknown (-1),
#: measurements and counters none (0).
_EMPTY: dict[Any, Any] = {int: -1, bool: False, str: "", Severity: Severity.INFO}
_ZERO_WHEN_MISSING = {
    name: 0
    for name in (
        "leader_epoch", "uncommitted", "hw_lag_ms", "lag_offsets", "lag_ms",
        "late_events", "duplicate_events",
    )
}  # fmt: skip


def _details(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str) and raw:
        loaded = json.loads(raw)
        return loaded if isinstance(loaded, dict) else {}
    return {}


def _replace(view: PartitionView, **changes: Any) -> PartitionView:
    return PartitionView(**{**{f.name: getattr(view, f.name) for f in fields(view)}, **changes})


# --- the Spark schema, derived --------------------------------------------------------------------


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The field types of ``cls``, resolved once per class: ``typing.get_type_hints``
    compiles every annotation's string again on each call (with the types worked out per
    value, ~1 ms a partition's row: ``bench.store_read_bench``, docs/benchmarks.md)."""
    return typing.get_type_hints(cls, include_extras=True)


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """(the type without ``| None``, whether it was optional); Int32 stays Int32."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], True
    return tp, False


def _is_tuple(tp: Any) -> bool:
    return typing.get_origin(tp) is tuple


def ddl_type(tp: Any) -> str:
    """The Spark DDL type of a field's annotation."""
    tp, _ = _unwrap(tp)
    if typing.get_origin(tp) is Annotated:
        return "int"  # Int32
    if _is_tuple(tp):
        return f"array<{ddl_type(typing.get_args(tp)[0])}>"
    if hasattr(tp, "__dataclass_fields__"):
        inner = ", ".join(f"{n}: {ddl_type(t)}" for n, t in _hints(tp).items())
        return f"struct<{inner}>"
    simple = {int: "long", str: "string", bool: "boolean", Severity: "string"}
    if tp in simple:
        return simple[tp]
    if tp is dict or typing.get_origin(tp) is dict:
        return "string"  # JSON text
    raise TypeError(f"no Spark type for {tp!r}")


def ddl(cls: type) -> str:
    """``name type, ...`` of a dataclass, for ``from_json`` and ``createDataFrame``."""
    return ", ".join(f"{name} {ddl_type(tp)}" for name, tp in _hints(cls).items())


#: The Spark schema of a state row.
STATE_DDL = ddl(PartitionView)

__all__ = [
    "REFRESHED_FIELDS",
    "STATE_DDL",
    "BrokerView",
    "EpochRow",
    "Int32",
    "OpenFinding",
    "PartitionView",
    "ReplicaRow",
    "ddl",
    "open_finding",
    "row_content",
    "state_json",
    "view_of",
]
