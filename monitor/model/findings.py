"""Findings: what the model says about a partition, a topic or a broker.

A finding is either a *condition* that opens and later resolves (``under_min_isr``), or a
one-off *event* (``unclean_election``). Kind names are a public contract: alert names,
metric labels and runbook anchors use them verbatim.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from enum import IntEnum, StrEnum
from typing import Any


class Severity(IntEnum):
    """Ordered, so that a topic's or cluster's status is the max of its partitions'."""

    INFO = 0
    WARNING = 1
    CRITICAL = 2

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        return cls[text.upper()]


class FindingKind(StrEnum):
    HW_LAG = "hw_lag"
    FOLLOWER_LAG = "follower_lag"
    ISR_SHRINK = "isr_shrink"
    ISR_EXPAND = "isr_expand"
    UNDER_REPLICATED = "under_replicated"
    UNDER_MIN_ISR = "under_min_isr"
    AT_MIN_ISR = "at_min_isr"
    OFFLINE = "offline"
    LEADER_ELECTION = "leader_election"
    UNCLEAN_ELECTION = "unclean_election"
    COMMITTED_DATA_LOSS = "committed_data_loss"
    HW_REGRESSION = "hw_regression"
    TRUNCATION_BELOW_HW = "truncation_below_hw"
    LOG_DIVERGENCE = "log_divergence"
    EPOCH_REGRESSION = "epoch_regression"
    LEADER_FLAPPING = "leader_flapping"
    STALE_TELEMETRY = "stale_telemetry"
    DURABILITY_RISK = "durability_risk"
    ELECTION_PENDING = "election_pending"
    ELECTION_UNVERIFIED = "election_unverified"
    TOPIC_RECREATED = "topic_recreated"
    REASSIGNMENT = "reassignment"
    TOPIC_DELETED = "topic_deleted"
    TELEMETRY_INCONSISTENT = "telemetry_inconsistent"


class FindingState(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"
    EVENT = "event"


#: Default severity of each kind. A rule may raise it for a particular case.
SEVERITY: dict[FindingKind, Severity] = {
    FindingKind.HW_LAG: Severity.WARNING,
    FindingKind.FOLLOWER_LAG: Severity.WARNING,
    FindingKind.ISR_SHRINK: Severity.WARNING,
    FindingKind.ISR_EXPAND: Severity.INFO,
    FindingKind.UNDER_REPLICATED: Severity.WARNING,
    FindingKind.UNDER_MIN_ISR: Severity.CRITICAL,
    FindingKind.AT_MIN_ISR: Severity.WARNING,
    FindingKind.OFFLINE: Severity.CRITICAL,
    FindingKind.LEADER_ELECTION: Severity.INFO,
    FindingKind.UNCLEAN_ELECTION: Severity.CRITICAL,
    FindingKind.COMMITTED_DATA_LOSS: Severity.CRITICAL,
    FindingKind.HW_REGRESSION: Severity.CRITICAL,
    FindingKind.TRUNCATION_BELOW_HW: Severity.CRITICAL,
    FindingKind.LOG_DIVERGENCE: Severity.CRITICAL,
    FindingKind.EPOCH_REGRESSION: Severity.WARNING,
    FindingKind.LEADER_FLAPPING: Severity.WARNING,
    FindingKind.STALE_TELEMETRY: Severity.WARNING,
    FindingKind.DURABILITY_RISK: Severity.WARNING,
    FindingKind.ELECTION_PENDING: Severity.INFO,
    FindingKind.ELECTION_UNVERIFIED: Severity.WARNING,
    FindingKind.TOPIC_RECREATED: Severity.INFO,
    FindingKind.REASSIGNMENT: Severity.INFO,
    FindingKind.TOPIC_DELETED: Severity.INFO,
    FindingKind.TELEMETRY_INCONSISTENT: Severity.WARNING,
}

#: Kinds that are one-off events; every other kind is a condition (open -> resolved).
EVENT_KINDS: frozenset[FindingKind] = frozenset(
    {
        FindingKind.ISR_SHRINK,
        FindingKind.ISR_EXPAND,
        FindingKind.LEADER_ELECTION,
        FindingKind.UNCLEAN_ELECTION,
        FindingKind.COMMITTED_DATA_LOSS,
        FindingKind.HW_REGRESSION,
        FindingKind.TRUNCATION_BELOW_HW,
        FindingKind.EPOCH_REGRESSION,
        FindingKind.ELECTION_UNVERIFIED,
        FindingKind.TOPIC_RECREATED,
        FindingKind.TOPIC_DELETED,
        FindingKind.TELEMETRY_INCONSISTENT,
    }
)

#: Kinds judged on replicas' log ends (``replica`` events: each broker's JMX exporter), so
#: unavailable where the collector reads only the Admin API (a managed cluster without JMX)
#: -- each with what it needs. Everything else is judged on the metadata, the HW
#: (ListOffsets) and the epoch records (OffsetsForLeaderEpoch), which the Admin API gives.
NEEDS_REPLICA_SAMPLES: dict[FindingKind, str] = {
    FindingKind.FOLLOWER_LAG: "each follower's log end against its leader's",
    FindingKind.HW_LAG: "the leader's log end, to tell a stalled HW from a quiet partition",
    FindingKind.TRUNCATION_BELOW_HW: "a replica's log end going back below the HW",
    FindingKind.LOG_DIVERGENCE: "a follower's log end staying ahead of its new leader's",
}


def unavailable_kinds(partitions: int, without_samples: int) -> list[FindingKind]:
    """The kinds no partition can be judged on: those of :data:`NEEDS_REPLICA_SAMPLES`, when
    none of ``partitions`` has a replica sample (the collector reads the Admin API only).

    >>> [str(k) for k in unavailable_kinds(3, 3)][:2], unavailable_kinds(3, 2)
    (['follower_lag', 'hw_lag'], [])
    """
    if partitions and without_samples == partitions:
        return sorted(NEEDS_REPLICA_SAMPLES)
    return []


#: One-off findings that mark a change whose lasting state is a condition (the ISR's size:
#: ``under_replicated``, ``at_min_isr``, ``under_min_isr``, ``offline``): a broker restart
#: shrinks and re-expands the ISR, so these say nothing once the condition has resolved.
#: A check judges the condition, not the change (``monitor status``'s window).
TRANSITION_KINDS: frozenset[FindingKind] = frozenset(
    {FindingKind.ISR_SHRINK, FindingKind.ISR_EXPAND}
)


def fields_state(obj: Any) -> list[Any]:
    """A slotted dataclass's pickled state: its fields' values in order -- what the
    dataclass's own ``__getstate__`` gives. Spelled out (with :func:`set_fields_state`) on
    the classes pickled by default (findings, a topic's settings, an election being
    judged): the model compiled by mypyc (:mod:`monitor.model._native`) would otherwise
    pickle its native classes another way, and a checkpoint written by the source would not
    load in the compiled model, nor the other way round."""
    return [getattr(obj, f.name) for f in fields(obj)]


def set_fields_state(obj: Any, state: list[Any]) -> None:
    """Unpickle :func:`fields_state` (frozen classes too, as the dataclass's own does).
    Fields added since the state was written (new fields go last, each with a default) take
    their defaults: a checkpoint of the release before loads."""
    names = fields(obj)
    if len(state) > len(names):
        raise ValueError(f"{type(obj).__name__}: {len(state)} values for {len(names)} fields")
    for f, value in zip(names, state, strict=False):
        object.__setattr__(obj, f.name, value)
    for f in names[len(state) :]:
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        if default is MISSING:
            raise ValueError(f"{type(obj).__name__}: no value for {f.name}")
        object.__setattr__(obj, f.name, default)


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the model saw. ``details`` holds the numbers that justify it.

    ``opened_at`` is when the condition opened (equal to ``at`` for open and event
    findings); together with the subject and kind it makes the id deterministic, so a
    replayed batch yields the same ids and a sink can drop duplicates.
    """

    kind: FindingKind
    state: FindingState
    severity: Severity
    cluster: str
    topic: str | None
    partition: int | None
    at: int
    opened_at: int
    broker: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __getstate__(self) -> list[Any]:
        return fields_state(self)

    def __setstate__(self, state: list[Any]) -> None:
        set_fields_state(self, state)

    @property
    def id(self) -> str:
        key = (
            f"{self.cluster}|{self.topic}|{self.partition}|{self.broker}|{self.kind}"
            f"|{self.state}|{self.opened_at}|{self.at}"
        )
        return hashlib.sha1(key.encode(), usedforsecurity=False).hexdigest()[:20]

    @property
    def subject_key(self) -> str:
        """The findings topic's record key: what the finding is about --
        ``cluster/topic/partition`` (a replica's finding too), ``cluster/topic``,
        ``cluster/broker/<id>``, or ``cluster``. A condition's ``open`` and ``resolved``
        (two ids) share it, so on a topic of many partitions they land in one partition,
        in the order the job wrote them.

        >>> Finding(FindingKind.OFFLINE, FindingState.OPEN, Severity.CRITICAL, "c", "t",
        ...         3, 5, 5, 2).subject_key
        'c/t/3'
        """
        if self.topic is not None and self.partition is not None:
            return f"{self.cluster}/{self.topic}/{self.partition}"
        if self.topic is not None:
            return f"{self.cluster}/{self.topic}"
        if self.broker is not None:
            return f"{self.cluster}/broker/{self.broker}"
        return self.cluster

    @property
    def subject(self) -> str:
        """Human name of what the finding is about: ``orders/3``, ``broker 2``."""
        if self.topic is not None and self.partition is not None:
            where = f"{self.topic}/{self.partition}"
            return f"{where} broker {self.broker}" if self.broker is not None else where
        if self.topic is not None:
            return f"topic {self.topic}"
        return f"broker {self.broker}" if self.broker is not None else f"cluster {self.cluster}"

    def to_dict(self) -> dict[str, Any]:
        """The finding's one dict form: the findings topic's JSON, the store's row (with
        ``details`` as JSON text there), ``--json`` output. :meth:`from_dict` reads it back."""
        return {
            "id": self.id,
            "kind": str(self.kind),
            "state": str(self.state),
            "severity": self.severity.label,
            "cluster": self.cluster,
            "topic": self.topic,
            "partition": self.partition,
            "broker": self.broker,
            "at": self.at,
            "opened_at": self.opened_at,
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Finding:
        """From :meth:`to_dict`'s form (``details`` may be JSON text, as in the store).

        >>> f = Finding(FindingKind.OFFLINE, FindingState.OPEN, Severity.CRITICAL, "c", "t",
        ...             0, 5, 5, None, {"epoch": 3})
        >>> Finding.from_dict(f.to_dict()) == f
        True
        """
        details = d.get("details")
        if isinstance(details, str):
            details = json.loads(details) if details else {}
        return cls(
            FindingKind(d["kind"]),
            FindingState(d["state"]),
            Severity.parse(d["severity"]),
            d["cluster"],
            d.get("topic"),
            None if d.get("partition") is None else int(d["partition"]),
            int(d["at"]),
            int(d["opened_at"]),
            None if d.get("broker") is None else int(d["broker"]),
            dict(details or {}),
        )


#: Where each state sorts among the findings of one instant (:func:`finding_order`).
STATE_ORDER: dict[FindingState, int] = {
    FindingState.OPEN: 0,
    FindingState.EVENT: 1,
    FindingState.RESOLVED: 2,
}


def finding_order(f: Finding) -> tuple[int, int, int, str]:
    """The sort key that gives back, for each condition, the order the model emitted its
    findings in: by ``at``, and at one instant the resolve of an earlier open first (its
    ``opened_at`` is earlier), then an open, then the resolve of that very open.

    An open and its resolve can share ``at``: a tick may open a condition at a clock past
    samples still in flight, and their resolve is stamped no earlier than the open
    (:meth:`monitor.model._emit.Emitter.condition`). Ordered by id alone, half of those pairs
    read back open (the CI short soak, 2026-11-29: a restarted job's exporter, seeded from
    its store, kept a resolved ``stale_telemetry`` open). The id last, for a total order.
    ``tests/model/test_finding_order.py`` checks the key against the model's own emission
    order on every scenario and on random streams -- with a tick clock that never goes
    back; the job's catch-up clamp can take it back, and then no key on the stamps can: the
    store orders by the job's own output order first (``seq``,
    :func:`monitor.contract.store.finding_seq`), and by this key only rows stored before it.
    """
    return (f.at, f.opened_at, STATE_ORDER[f.state], f.id)
