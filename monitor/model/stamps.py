"""Which event stamps to believe: one event stamped in the future must not blind a partition.

The model applies a source's events in the order of their stamps and ignores an event older
than one it already applied (late: :mod:`monitor.model.order`). So one event stamped ahead
-- a collector whose clock jumped, a bad producer -- would make every later, real event of
its partition late: the partition could shrink its ISR and go offline with no finding, and
the newest stamp (freshness) would say the telemetry is current while it is an hour old.

So a stamp is checked against a clock the event's own source does not set, before the model
sees the event:

* the Spark job checks each event against its Kafka record's timestamp
  (``streaming/job.py``; with ``message.timestamp.type=LogAppendTime`` on the events topic
  that is the broker's clock) and dead-letters an event stamped further ahead than
  ``ModelConfig.max_stamp_ahead_ms``;
* a replay has no record times: :class:`StampGuard` holds an event stamped further ahead
  than that of everything admitted so far in its cluster (a jump -- or the very first
  events) as suspect, until an event of *another* source (the cluster's metadata reads,
  each broker's exporter page) stamped near it agrees. A jump no other source confirms is
  rejected with a reason; a stream that really resumed after a gap is confirmed by its next
  round.

>>> from monitor.model.events import BrokerReport, PartitionMeta
>>> g = StampGuard(ahead_ms=60_000)
>>> g.admit(BrokerReport("c", 1_000, broker=1, alive=True))  # the first event: held
[]
>>> meta = PartitionMeta("c", 1_002, "t", 0, leader=1, leader_epoch=0, replicas=(1,), isr=(1,))
>>> [(type(e).__name__, reason) for e, reason in g.admit(meta)]  # another source agrees
[('BrokerReport', None), ('PartitionMeta', None)]
>>> g.admit(BrokerReport("c", 3_600_000, broker=1, alive=True))  # an hour ahead: held
[]
>>> [reason.split(",")[0] for _, reason in g.flush()]  # nothing confirmed it
['observed_at 3600000 is 3598998 ms ahead of the newest stamp of cluster c']
"""

from __future__ import annotations

from dataclasses import dataclass, field

from monitor.model.events import BrokerReport, ModelEvent, ReplicaReport

#: Who stamped an event: a cluster's metadata reads, or one broker's exporter page.
Source = tuple[str, int]
_METADATA = -1
#: Suspect events held per cluster: past this many, the oldest held is rejected, never
#: admitted unchecked (1,001 events a year ahead from one source, admitted so, were judged:
#: a truncation_below_hw and a follower_lag of the broker in tests/model/test_stamps.py's
#: case, a critical one in issue 50's). Until a cluster has admitted anything, nothing can
#: check its stamps: its first events are admitted then instead.
HOLD_LIMIT = 1_000

Decided = list[tuple[ModelEvent, str | None]]

#: Why a stamp is not believed, in every place that checks one (``str.format`` fields; the
#: job fills it with SQL's ``format_string``).
REASON = (
    "observed_at {at} is {ahead} ms ahead of {reference_is} ({reference}); "
    "at most {limit} ms (max_stamp_ahead_ms) is believed"
)


def believed(at: int, reference: int, ahead_ms: int) -> bool:
    """Whether a stamp ``at`` is no further ahead of ``reference`` (a clock its own source
    does not set) than ``ahead_ms``."""
    return at <= reference + ahead_ms


def source_of(event: ModelEvent) -> Source:
    """``(cluster, broker)`` for a broker's own reports (``replica``, ``broker``), else
    ``(cluster, -1)``: the metadata reads (``partition``, ``topic_config``)."""
    if isinstance(event, ReplicaReport | BrokerReport):
        return (event.cluster, event.broker)
    return (event.cluster, _METADATA)


@dataclass
class _Cluster:
    newest: int = -1  # the newest admitted stamp (-1: nothing admitted yet)
    held: list[ModelEvent] = field(default_factory=list)


class StampGuard:
    """Admits the events of a stream whose stamps another source vouches for.

    :meth:`admit` returns the events it decides, in the order to apply them:
    ``(event, None)`` to apply, ``(event, reason)`` rejected; :meth:`flush`, at the end of
    the stream, decides what is still held.
    """

    def __init__(self, ahead_ms: int) -> None:
        self.ahead_ms = ahead_ms
        self.clusters: dict[str, _Cluster] = {}

    def admit(self, event: ModelEvent) -> Decided:
        c = self.clusters.get(event.cluster)
        if c is None:
            c = self.clusters[event.cluster] = _Cluster()
        at = event.observed_at
        if c.newest >= 0 and believed(at, c.newest, self.ahead_ms):
            if not c.held:  # the common case: nothing held, a stamp in line
                if at > c.newest:
                    c.newest = at
                return [(event, None)]
            return self._accept(c, event)
        # A jump (or the first events): does an event of another source, held, agree?
        source = source_of(event)
        near = [
            e
            for e in c.held
            if source_of(e) != source and abs(e.observed_at - event.observed_at) <= self.ahead_ms
        ]
        if not near:
            c.held.append(event)
            if len(c.held) <= HOLD_LIMIT:
                return []
            if c.newest < 0:  # the stream's first events, one source alone: nothing to check
                held, c.held = c.held, []
                c.newest = max(e.observed_at for e in held)
                return [(e, None) for e in held]
            oldest = c.held.pop(0)
            return [(oldest, self._reason(event.cluster, c, oldest, "more held than HOLD_LIMIT"))]
        c.newest = max(c.newest, event.observed_at, *(e.observed_at for e in near))
        return self._accept(c, event)

    def _accept(self, c: _Cluster, event: ModelEvent) -> Decided:
        """Admit ``event``, then what was held that is no longer ahead of the newest."""
        c.newest = max(c.newest, event.observed_at)
        ok = [believed(e.observed_at, c.newest, self.ahead_ms) for e in c.held]
        out: Decided = [(e, None) for e, yes in zip(c.held, ok, strict=True) if yes]
        c.held = [e for e, yes in zip(c.held, ok, strict=True) if not yes]
        out.append((event, None))
        return out

    def flush(self) -> Decided:
        """At the end of the stream: a held jump no other source confirmed is rejected; the
        events of a cluster that admitted nothing at all have nothing to be checked against
        and are admitted."""
        out: Decided = []
        for name, c in self.clusters.items():
            for e in c.held:
                out.append((e, None if c.newest < 0 else self._reason(name, c, e)))
            c.held = []
        return out

    def _reason(self, cluster: str, c: _Cluster, e: ModelEvent, why: str = "") -> str:
        extra = f", {why}" if why else ""
        return REASON.format(
            at=e.observed_at,
            ahead=e.observed_at - c.newest,
            reference_is=f"the newest stamp of cluster {cluster}, no other source agreeing{extra}",
            reference=c.newest,
            limit=self.ahead_ms,
        )
