"""Per-partition, per-topic and per-broker state kept by the model.

These are plain mutable dataclasses: the transition functions update them in place and
return them (copying every state per event would dominate the hot path of the Spark job).
They hold no derived values that could drift apart, except the few *measurements* the
exporter needs (lags), which are recomputed on every relevant event.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from monitor.model.config import ModelConfig
from monitor.model.events import PartitionMeta
from monitor.model.findings import FindingKind, Severity, fields_state, set_fields_state

#: Equal tuples of broker ids (replicas, ISR, ...) as one object: a million partitions hold
#: a few thousand distinct sets. Memory only -- no rule depends on identity --, and bounded.
_SHARED: dict[tuple[int, ...], tuple[int, ...]] = {}
_SHARED_MAX = 65_536

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def shared(brokers: tuple[int, ...]) -> tuple[int, ...]:
    """The one kept object equal to ``brokers`` (``brokers`` itself the first time)."""
    got = _SHARED.get(brokers)
    if got is None:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.clear()
        got = _SHARED[brokers] = brokers
    return got


class EpochEntry(NamedTuple):
    """One leadership: epoch, the first offset written under it, and who led.

    The cluster-wide counterpart of a replica's ``leader-epoch-checkpoint`` entries.
    ``start_offset`` is the new leader's LEO when it took over, as last observed (-1 when
    unknown).
    """

    epoch: int
    start_offset: int
    leader: int | None
    at: int


@dataclass(slots=True)
class OpenCondition:
    """A condition finding that is currently open, with its latest numbers."""

    kind: FindingKind
    severity: Severity
    opened_at: int
    broker: int | None
    details: dict[str, Any]


@dataclass(slots=True)
class ElectionCheck:
    """An election whose loss is not decided yet -- or was decided on a LEO sample, which a
    later epoch record may refine (:mod:`monitor.model.election`)."""

    epoch: int
    leader: int
    #: When the election was observed (the metadata's stamp).
    at: int
    #: The committed HW it is judged against (the highest seen), and when that was seen.
    committed: int
    committed_at: int
    #: By membership: the new leader was in the last ISR or ELR.
    clean: bool
    leader_before_leo: int
    #: The new leader's log is valid only below this (-1: all of it): it held more than an
    #: earlier epoch's start and was never seen to truncate there or to rejoin the ISR.
    valid_below: int
    #: The new leader's LEO sampled certainly before the election (-1: none such).
    leo_before: int
    #: The leader_election finding's details, for the findings that follow.
    details: dict[str, Any]
    #: Its latest LEO sampled before the election and not before the committed HW (-1:
    #: none), and whether that sample was a drop (its log end went back: a truncation).
    pre: int = -1
    pre_drop: bool = False
    #: When ``pre`` was sampled, and whether certainly before the election (before the
    #: metadata that still showed the old leadership).
    pre_at: int = -1
    pre_certain: bool = False
    #: When the metadata before the election was read.
    meta_before: int = -1
    #: Whether a sample of the new leader taken after the election has been applied.
    post_seen: bool = False
    #: Decided on a LEO sample, which a later epoch record may refine (every other verdict
    #: ends the check: the partition state drops it).
    on_sample: bool = False
    #: The LEO a verdict on a sample used.
    used: int = -1

    def __getstate__(self) -> list[Any]:
        return fields_state(self)

    def __setstate__(self, state: list[Any]) -> None:
        set_fields_state(self, state)


@dataclass(slots=True)
class ReplicaState:
    """What the model knows of one replica of a partition."""

    #: Last accepted log end offset (-1 unknown) and when it was observed.
    leo: int = -1
    observed_at: int = -1
    #: When this replica was last known to hold everything the leader had (Kafka's
    #: lastCaughtUpTime, reconstructed from samples). -1 unknown.
    caught_up_at: int = -1
    #: Measured lag behind the leader, in offsets and milliseconds (0 when caught up).
    lag_offsets: int = 0
    lag_ms: int = 0
    #: A lower LEO waiting for a second sample before it is believed (truncation check),
    #: and when it was first seen.
    suspect_leo: int = -1
    suspect_at: int = -1
    #: Consecutive samples in which this follower was ahead of the leader, since when.
    ahead_samples: int = 0
    ahead_since: int = -1
    #: Offset this replica must truncate to after an election (epoch start), or -1.
    must_truncate_to: int = -1
    #: (epoch, LEO before, LEO after) of the last truncation reported, so that a stale
    #: second collector replaying the same drop does not report it twice.
    last_truncation: tuple[int, int, int] = (-1, -1, -1)
    #: The follower sample last counted in :attr:`ahead_samples` (each sample counts once).
    ahead_counted_at: int = -1
    #: The LEO before its last rise, and the epoch of that rise, while the rise has been
    #: seen in one sample only (-1: none, or confirmed by a second sample at or above it).
    #: A drop back to at least the value before, in the same leadership, contradicts the
    #: one sample: a spike of the telemetry (``telemetry_inconsistent``), not a truncation.
    rise_from: int = -1
    rise_epoch: int = -1
    #: When :attr:`leo` was sampled (``observed_at`` moves on with a held lower sample).
    leo_at: int = -1


@dataclass(slots=True)
class PartitionState:
    """Everything the model keeps for one partition."""

    cluster: str
    topic: str
    partition: int
    #: Kafka's topic id of the incarnation this history belongs to (None: not reported),
    #: and the ids of earlier incarnations (a late event of one of them is not news).
    topic_id: str | None = None
    retired_topic_ids: tuple[str, ...] = ()
    replicas: tuple[int, ...] = ()
    #: A running reassignment (KIP-455): replicas being added (copying) and removed.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    prev_isr: tuple[int, ...] = ()
    eligible_leader_replicas: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    leader: int | None = None
    leader_epoch: int = -1
    lineage: list[EpochEntry] = field(default_factory=list)
    #: The partition's HW as last reported, and when.
    hw: int = -1
    hw_at: int = -1
    #: Highest HW ever observed committed (rebased after a loss has been reported), and when.
    max_hw: int = -1
    max_hw_at: int = -1
    #: HW treated as a virtual follower: when it last reached the leader's LEO.
    hw_caught_up_at: int = -1
    hw_lag_ms: int = 0
    #: A lower HW waiting for a second sample before it is believed.
    suspect_hw: int = -1
    log_start_offset: int = -1
    replica_states: dict[int, ReplicaState] = field(default_factory=dict)
    #: When the current leadership began (as observed); lag and "ahead" evidence start here.
    epoch_started_at: int = -1
    #: Recent samples of the current leader, oldest first, at most ``config.leo_history``:
    #: ``[t0, leo0, t1, leo1, ...]`` (:meth:`record_leader_leo`), each *relative to*
    #: (:attr:`leos_base_t`, :attr:`leos_base_leo`). One array, not a list of (time, LEO)
    #: tuples (~120 B a sample; at a million partitions 3.5 GB of a worker's memory): of
    #: int32 while the offsets from the base fit (8 B a sample), else of int64. Read the
    #: newest through :meth:`leader_last_at` / :meth:`leader_last_leo`; the partition
    #: module's ``_leader_passed`` scans them.
    leader_leos: array[int] = field(default_factory=lambda: array("i"))
    leos_base_t: int = 0
    leos_base_leo: int = 0
    #: Whether :attr:`leader_leos` rises: its times and LEOs never went down (almost always:
    #: a leader's log end falls only when it truncates). Then "when did the leader first
    #: pass this offset" is found from the newest sample back, in a step or two, instead of
    #: from the oldest (:func:`monitor.model.rules.time_behind`).
    leader_leos_rising: bool = True
    #: The last election, while its loss is undecided or decided on a sample.
    election: ElectionCheck | None = None
    #: Times of recent leader elections (for flapping; a tuple: most partitions have none).
    election_times: tuple[int, ...] = ()
    meta_at: int = -1
    last_seen: int = -1
    #: Open conditions by key (``kind`` or ``kind:broker``).
    open: dict[str, OpenCondition] = field(default_factory=dict)
    late_events: int = 0
    duplicate_events: int = 0
    #: An instant at which some followers were left unjudged (their sample of the round
    #: may still come); they are judged at the partition's next later instant. -1: none.
    deferred_at: int = -1
    #: An HW above everything its leader was seen to hold, and when: held until a witness
    #: confirms it (a later leader sample at or above it, or a second HW sample at or above
    #: it) -- one impossible sample never becomes the committed reference. -1: none.
    pending_hw: int = -1
    pending_hw_at: int = -1
    #: Metadata reads showing the current epoch, and the epoch before it: an epoch seen in
    #: one read and then gone back to (at least) the one before was a spike of that read.
    epoch_reads: int = 0
    epoch_before: int = -1
    #: A read naming another leader at the same epoch (impossible: a new leader bumps the
    #: epoch), held until a second read says the same (-1: none), and when.
    pending_leader: int = -1
    pending_leader_at: int = -1
    #: The most the committed HW rose between two of its reads believed: how fast it grows,
    #: where no leader log end says it (the Admin API alone).
    hw_max_step: int = 0
    #: A read at a lower epoch, held (a stale broker's view, or the current epoch a spike)
    #: until a second such read (then both are applied) or a current one (then dropped).
    pending_meta: PartitionMeta | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.cluster, self.topic, self.partition)

    def record_leader_leo(self, t: int, leo: int, limit: int) -> None:
        """A sample of the leader's LEO; the history keeps the last ``limit`` (once full, the
        oldest goes first: the array's allocation never grows past them)."""
        h = self.leader_leos
        dt, dl = t - self.leos_base_t, leo - self.leos_base_leo
        if h and (dt < h[-2] or dl < h[-1]):
            self.leader_leos_rising = False
        while len(h) >= 2 * limit > 0:
            del h[:2]
        if not (_I32_MIN <= dt <= _I32_MAX and _I32_MIN <= dl <= _I32_MAX) and h.itemsize < 8:
            self._rebase(t, leo)
            h, dt, dl = self.leader_leos, 0, 0
        h.append(dt)
        h.append(dl)

    def _rebase(self, t: int, leo: int) -> None:
        """The samples made relative to ``(t, leo)`` -- of int64 if they no longer fit int32
        (a leadership of weeks, or a log that grew by 2^31 offsets since its base)."""
        dt, dl = t - self.leos_base_t, leo - self.leos_base_leo
        h = self.leader_leos
        shifted = [x - (dl if i & 1 else dt) for i, x in enumerate(h)]
        fits = all(_I32_MIN <= x <= _I32_MAX for x in shifted)
        self.leader_leos = array("i" if fits else "q", shifted)
        self.leos_base_t, self.leos_base_leo = t, leo

    def reset_leader_leo(self, t: int = -1, leo: int = -1) -> None:
        """Forget the leader's samples; keep ``(t, leo)`` as the first if ``leo`` is known."""
        if leo >= 0:
            self.leader_leos = array("i", (0, 0))
            self.leos_base_t, self.leos_base_leo = t, leo
        else:
            self.leader_leos = array("i")
            self.leos_base_t = self.leos_base_leo = 0
        self.leader_leos_rising = True

    def leader_last_at(self) -> int:
        """When the leader's newest sample was taken (-1: no sample)."""
        return self.leader_leos[-2] + self.leos_base_t if self.leader_leos else -1

    def leader_last_leo(self) -> int:
        """The leader's LEO in its newest sample (-1: no sample)."""
        return self.leader_leos[-1] + self.leos_base_leo if self.leader_leos else -1

    def leader_max_step(self, skip_newest: bool = False) -> int:
        """The most the leader's LEO rose between two of its kept samples (0: fewer), the
        newest left out with ``skip_newest``."""
        h = self.leader_leos
        end = len(h) - 2 if skip_newest else len(h)
        return max((h[i] - h[i - 2] for i in range(3, end, 2)), default=0)

    def drop_leader_samples_above(self, leo: int) -> None:
        """Forget the leader's samples above ``leo`` (one found to be a spike)."""
        h, base = self.leader_leos, self.leos_base_leo
        kept = [x for i in range(0, len(h), 2) if h[i + 1] + base <= leo for x in h[i : i + 2]]
        self.leader_leos = array(h.typecode, kept)
        self.leader_leos_rising = all(
            kept[i] >= kept[i - 2] and kept[i + 1] >= kept[i - 1] for i in range(2, len(kept), 2)
        )

    def leader_samples(self) -> int:
        """How many samples of the leader's LEO the history holds."""
        return len(self.leader_leos) // 2

    def append_lineage(self, entry: EpochEntry, config: ModelConfig) -> None:
        """A new epoch in the lineage, which keeps ``config.lineage_limit`` entries."""
        self.lineage.append(entry)
        if len(self.lineage) > config.lineage_limit:
            del self.lineage[0]

    def leader_leo(self) -> int:
        """The current leader's last known LEO, or -1."""
        if self.leader is None:
            return -1
        rs = self.replica_states.get(self.leader)
        return rs.leo if rs is not None else -1

    def allowed_hw(self) -> int:
        """The HW the ISR's known LEOs allow: ``min(LEO)`` over in-sync replicas, or -1.

        Kafka's leader never advances HW past an in-sync replica's LEO, so a reported HW
        above this is only sampling skew (the HW sample is fresher than a LEO sample).
        """
        leos = [
            self.replica_states[b].leo
            for b in self.isr
            if b in self.replica_states and self.replica_states[b].leo >= 0
        ]
        return min(leos) if leos else -1

    def shape(self) -> tuple[object, ...] | None:
        """What the partition is apart from the numbers its rounds move (offsets, lags,
        stamps): its leader, epoch, ISR, replicas, replicas sampled, lineage and counts of
        late and duplicate events, as one comparable value; ``None`` while a condition is
        open (its details move with those numbers). Two states of equal shape differ in
        those numbers at most: the Spark operator writes a partition's state row when its
        shape changed, and its numbers now and then (``monitor.contract.state.row_content``).
        """
        if self.open:
            return None
        return (
            self.leader, self.leader_epoch, self.isr, self.replicas, tuple(self.replica_states),
            tuple(self.lineage), self.late_events, self.duplicate_events,
        )  # fmt: skip

    def uncommitted(self) -> int:
        """Uncommitted backlog: leader LEO - HW (0 when either is unknown)."""
        leo = self.leader_leo()
        return max(0, leo - self.hw) if leo >= 0 and self.hw >= 0 else 0

    def severity(self) -> Severity:
        """The highest severity among open conditions (INFO when none)."""
        return max((c.severity for c in self.open.values()), default=Severity.INFO)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    replication_factor: int
    min_insync_replicas: int
    unclean_leader_election_enable: bool

    def __getstate__(self) -> list[Any]:
        return fields_state(self)

    def __setstate__(self, state: list[Any]) -> None:
        set_fields_state(self, state)


@dataclass(slots=True)
class TopicState:
    cluster: str
    topic: str
    config: TopicConfig | None = None
    config_at: int = -1
    open: dict[str, OpenCondition] = field(default_factory=dict)


@dataclass(slots=True)
class BrokerState:
    cluster: str
    broker: int
    alive: bool = True
    observed_at: int = -1
    counters: dict[str, int | bool] = field(default_factory=dict)
    open: dict[str, OpenCondition] = field(default_factory=dict)
    #: Since when the unclean-election counter has been reported without a gap or a drop
    #: (-1: not reported by the last report).
    unclean_counted_since: int = -1
    #: The process start the counter's baseline belongs to (None: not reported).
    started_at: int | None = None
    #: When the broker was last seen coming back: answering again after not answering, or
    #: reporting a process start that moved (-1: never). A witness that a replica's log end
    #: going back is a restart's truncation, not a bad sample.
    back_at: int = -1
    #: The process start of its last report (None: not reported).
    process_started_at: int | None = None
