"""A small simulation of one Kafka partition's replication, and of the collector sampling it.

The property tests need telemetry that could have come from a real cluster -- with the
ground truth beside it (what was committed, what was lost) -- so that they can check what
the model *reports* against what *happened*. This is that oracle: Kafka's replication
protocol as ``shared/domain.md`` states it, in simulated milliseconds:

- the leader appends produced records (``acks=all`` writes are refused while the ISR is
  below ``min.insync.replicas``); each follower fetches from its LEO; the leader keeps the
  fetch offset as the follower's remote LEO and ``HW = max(HW, min(leader LEO, remote LEO
  of every ISR follower))``; a follower's own HW is ``min(leader HW, its LEO)``;
- a follower not caught up for ``replica.lag.time.max.ms`` leaves the ISR (Kafka's
  lastCaughtUpTime rule); one whose fetch offset reaches the HW (and the epoch start)
  rejoins;
- a killed broker is fenced after the session timeout; a fenced leader is replaced by the
  first live ISR member in replica order (clean: its LEO is at least the HW), or, when none
  is left, the partition goes offline (ISR kept as the last leader) until a forced or
  enabled unclean election picks a live replica outside the ISR;
- every leadership bumps the epoch and records ``(epoch, start offset)`` in the new
  leader's epoch cache; a follower whose log holds records of an older epoch beyond the
  leader's end of that epoch truncates there first (KIP-101's OffsetsForLeaderEpoch);
- the new leader's HW starts at its own (follower) HW, as in Kafka's ``makeLeader``.

The collector (``monitor collect``) is simulated the way it reads a real cluster: a round
every ``interval_ms``; each live broker's JMX page read a few ms into the round and stamped
with the round's start; the ``partition`` event stamped just after, with the HW from the
leader (ListOffsets) read a little later, and the new epoch's start offset
(OffsetsForLeaderEpoch) asked until it is answered. Faults can drop a broker's scrape or
withhold the epoch record for a round, as a busy new leader does.

Pure and deterministic for a given ``random.Random``; no I/O.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from monitor.dev.testing import T0, Timeline
from monitor.model.order import order_key


@dataclass
class Replica:
    id: int
    up: bool = True
    #: Fenced by the controller (killed and its session expired); unfenced on restart.
    fenced: bool = False
    #: The epoch of each record, by offset: a record's identity is (epoch, offset).
    log: list[int] = field(default_factory=list)
    #: The leader-epoch cache: (epoch, start offset), ascending.
    epochs: list[tuple[int, int]] = field(default_factory=list)
    hw: int = 0
    down_since: int = -1

    @property
    def leo(self) -> int:
        return len(self.log)

    def truncate(self, offset: int) -> None:
        del self.log[offset:]
        self.epochs = [(e, s) for e, s in self.epochs if s < offset]
        self.hw = min(self.hw, offset)

    def end_offset_for(self, epoch: int) -> int:
        """Where ``epoch`` ends in this replica's log: the start of the first later epoch
        in its cache, or its log end (OffsetsForLeaderEpoch, asked of a leader)."""
        later = [s for e, s in self.epochs if e > epoch]
        return min(later) if later else self.leo


@dataclass
class Truth:
    """What really happened, for the properties to compare the model's reports with."""

    #: The highest HW the leader ever had, and the records (epoch, offset) below it.
    max_hw: int = 0
    committed: set[tuple[int, int]] = field(default_factory=set)
    #: Elections: (time, epoch, leader, clean, start offset, committed offsets lost).
    elections: list[tuple[int, int, int, bool, int, int]] = field(default_factory=list)
    #: The highest HW the collector has shown (rebased like ``max_hw`` after a loss), and
    #: per election the committed offsets lost *below it*: what a monitor sampling the HW
    #: can know was committed (HW growth after its last read is invisible to it).
    shown_hw: int = 0
    shown_losses: list[int] = field(default_factory=list)


@dataclass
class Sim:
    """One partition of RF ``len(replicas)``, its controller, producer and collector."""

    rng: random.Random
    replicas: tuple[int, ...] = (1, 2, 3)
    min_isr: int = 2
    acks_all: bool = True
    unclean_enabled: bool = False
    lag_max_ms: int = 30_000
    session_timeout_ms: int = 9_000
    interval_ms: int = 5_000
    step_ms: int = 100
    #: Records produced per step (uniform in this range).
    rate: tuple[int, int] = (0, 5)
    topic: str = "sim"
    now: int = T0
    leader: int | None = None
    epoch: int = 0
    isr: list[int] = field(default_factory=list)
    #: Leader's view of each follower: fetch offset, lastCaughtUp, the leader LEO at the
    #: previous fetch and when it was.
    fetch_offset: dict[int, int] = field(default_factory=dict)
    caught_up_at: dict[int, int] = field(default_factory=dict)
    last_fetch: dict[int, tuple[int, int]] = field(default_factory=dict)
    truth: Truth = field(default_factory=Truth)
    #: Collector faults: rounds left in which a broker's scrape fails, and in which the
    #: epoch record request fails (a busy new leader, a client that does not know it yet).
    miss_scrape: dict[int, int] = field(default_factory=dict)
    withhold_epoch_rounds: int = 0
    #: How late into its round a broker's JMX page may be read (it is stamped with the
    #: round's start whenever it is read): a busy or slow exporter, up to one interval.
    max_scrape_delay_ms: int = 300
    #: The epoch whose start offset the collector has read (it asks until answered).
    _epoch_asked: int = -1
    _next_round: int = T0
    _pending: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.brokers = {b: Replica(b) for b in self.replicas}
        self.leader = self.replicas[0]
        self.isr = list(self.replicas)
        self.brokers[self.leader].epochs.append((0, 0))
        for b in self.replicas:
            self.fetch_offset[b] = 0
            self.caught_up_at[b] = self.now
            self.last_fetch[b] = (0, self.now)
        self.tl = Timeline(topic=self.topic, start=self.now)
        self.tl.config(rf=len(self.replicas), min_isr=self.min_isr, unclean=self.unclean_enabled)

    # -- the cluster ---------------------------------------------------------------------------

    @property
    def hw(self) -> int:
        return self.brokers[self.leader].hw if self.leader is not None else -1

    def _serving(self, b: int) -> bool:
        r = self.brokers[b]
        return r.up and not r.fenced

    def _produce(self) -> None:
        if self.leader is None or not self._serving(self.leader):
            return
        if self.acks_all and len(self.isr) < self.min_isr:
            return  # NotEnoughReplicas
        n = self.rng.randint(*self.rate)
        self.brokers[self.leader].log.extend([self.epoch] * n)

    def _fetch(self, b: int) -> None:
        assert self.leader is not None
        ld, f = self.brokers[self.leader], self.brokers[b]
        # Truncate what the leader does not have, under the leader-epoch protocol (never to
        # the follower's own HW): OffsetsForLeaderEpoch on the follower's latest epoch; the
        # leader answers for the largest epoch it knows at or below it, and if that is an
        # older one, the follower stops where *its* log left that epoch (KIP-279).
        if f.epochs and f.epochs[-1][0] != self.epoch:
            asked = f.epochs[-1][0]
            known = max((e for e, _ in ld.epochs if e <= asked), default=-1)
            end = ld.end_offset_for(known)
            if known < asked:
                end = min(end, f.end_offset_for(known))
            if f.leo > end:
                f.truncate(end)
        offset, leader_leo = f.leo, ld.leo
        self.fetch_offset[b] = offset
        prev_leader_leo, prev_at = self.last_fetch[b]
        if offset >= leader_leo:
            self.caught_up_at[b] = self.now
        elif offset >= prev_leader_leo:
            self.caught_up_at[b] = max(self.caught_up_at[b], prev_at)
        self.last_fetch[b] = (leader_leo, self.now)
        f.log.extend(ld.log[offset:])
        f.epochs = sorted({*f.epochs, *((e, s) for e, s in ld.epochs if s >= offset)})
        f.hw = min(ld.hw, f.leo)

    def _advance_hw(self) -> None:
        if self.leader is None:
            return
        ld = self.brokers[self.leader]
        fetched = [self.fetch_offset[b] for b in self.isr if b != self.leader]
        new = min([ld.leo, *fetched])
        if new > ld.hw:
            ld.hw = new
        if ld.hw > self.truth.max_hw:
            for off in range(self.truth.max_hw, ld.hw):
                self.truth.committed.add((ld.log[off], off))
            self.truth.max_hw = ld.hw

    def _isr_changes(self) -> None:
        if self.leader is None or not self._serving(self.leader):
            return
        ld = self.brokers[self.leader]
        for b in list(self.isr):
            if b != self.leader and self.now - self.caught_up_at[b] > self.lag_max_ms:
                self.isr.remove(b)
        start = next((s for e, s in ld.epochs if e == self.epoch), 0)
        for b in self.replicas:
            if b not in self.isr and self._serving(b) and self.fetch_offset[b] >= max(ld.hw, start):
                self.isr.append(b)

    def _controller(self) -> None:
        for b, r in self.brokers.items():
            if not r.up and not r.fenced and self.now - r.down_since >= self.session_timeout_ms:
                r.fenced = True
                if b == self.leader:
                    self._leader_lost()
                elif b in self.isr and len(self.isr) > 1:
                    self.isr.remove(b)
        if self.leader is None:
            # An offline partition: its last ISR member returning leads again (clean);
            # with unclean elections enabled, any live replica may.
            back = [b for b in self.isr if self._serving(b)]
            if back:
                self._elect(back[0], clean=True)
            elif self.unclean_enabled:
                self.unclean_elect()

    def _leader_lost(self) -> None:
        old = self.leader
        candidates = [b for b in self.replicas if b in self.isr and b != old and self._serving(b)]
        if candidates:
            if old in self.isr:
                self.isr.remove(old)
            self._elect(candidates[0], clean=True)
        elif self.unclean_enabled and any(self._serving(b) for b in self.replicas if b != old):
            self.unclean_elect()
        else:
            self.leader = None
            self.epoch += 1

    def _elect(self, b: int, clean: bool) -> None:
        new = self.brokers[b]
        self.epoch += 1
        self.leader = b
        new.epochs.append((self.epoch, new.leo))
        kept = {(e, o) for e, o in self.truth.committed if o < new.leo and new.log[o] == e}
        lost = len(self.truth.committed) - len(kept)
        self.truth.elections.append((self.now, self.epoch, b, clean, new.leo, lost))
        gone = self.truth.committed - kept
        self.truth.shown_losses.append(sum(1 for _e, o in gone if o < self.truth.shown_hw))
        if gone:
            # Gone for good: the committed history now follows the new leader's log, from
            # the first committed record it lacks (or holds another version of).
            diverged = min(o for _e, o in gone)
            self.truth.committed = kept
            self.truth.max_hw = diverged
            self.truth.shown_hw = min(self.truth.shown_hw, diverged)
        for f in self.replicas:
            self.fetch_offset[f] = new.leo if f == b else -1
            self.caught_up_at[f] = self.now
            self.last_fetch[f] = (new.leo, self.now)
        if clean:
            if b not in self.isr:
                self.isr.append(b)
        else:
            self.isr = [b]

    # -- faults ---------------------------------------------------------------------------------

    def kill(self, b: int) -> None:
        r = self.brokers[b]
        if r.up:
            r.up, r.down_since = False, self.now

    def restart(self, b: int) -> None:
        r = self.brokers[b]
        r.up, r.fenced = True, False

    #: SIGSTOP: no fetches, no heartbeats (fenced after the session timeout), no JMX
    #: answers -- to the cluster the same as a kill, and the log is kept either way.
    pause, resume = kill, restart

    def unclean_elect(self) -> bool:
        """A forced (or enabled) unclean election of the live replica holding most."""
        live = [b for b in self.replicas if b != self.leader and self._serving(b)]
        if not live or (self.leader is not None and self._serving(self.leader)):
            return False
        best = max(live, key=lambda x: self.brokers[x].leo)
        self._elect(best, clean=best in self.isr)
        return True

    def preferred_election(self) -> None:
        """Leadership back to the first replica, if it is in the ISR (always clean)."""
        first = self.replicas[0]
        if self.leader != first and first in self.isr and self._serving(first):
            self._elect(first, clean=True)

    # -- time -----------------------------------------------------------------------------------

    def run(self, ms: int) -> None:
        end = self.now + ms
        while self.now < end:
            self.now += self.step_ms
            self._produce()
            if self.leader is not None and self._serving(self.leader):
                for b in self.replicas:
                    if b != self.leader and self._serving(b):
                        self._fetch(b)
                self._advance_hw()
                self._isr_changes()
                self._advance_hw()
            self._controller()
            self._collect()

    # -- the collector --------------------------------------------------------------------------

    def _collect(self) -> None:
        for _due, _seq, ev in [p for p in self._pending if p[0] <= self.now]:
            self._sample(ev)
        self._pending = [p for p in self._pending if p[0] > self.now]
        if self.now < self._next_round:
            return
        t = self.now
        self._next_round = t + self.interval_ms
        for b in self.replicas:
            if self.miss_scrape.get(b, 0) > 0:
                self.miss_scrape[b] -= 1
                continue
            read_at = t + self.step_ms * self.rng.randint(
                0, self.max_scrape_delay_ms // self.step_ms
            )
            self._pending.append((read_at, 0, {"what": "jmx", "broker": b, "stamp": t}))
        read_at = t + self.step_ms * self.rng.randint(0, 2)
        self._pending.append((read_at, 1, {"what": "meta", "stamp": t + 2}))
        if read_at == self.now:
            self._collect()

    def _sample(self, ev: dict[str, Any]) -> None:
        stamp = ev["stamp"]
        if ev["what"] == "jmx":
            b = ev["broker"]
            self.tl.now = stamp
            if not self.brokers[b].up:
                self.tl.broker(b, alive=False)
                return
            self.tl.broker(b, alive=True)
            self.tl.replica(b, leo=self.brokers[b].leo)
            return
        self.tl.now = stamp
        hw = self.hw if self.leader is not None and self._serving(self.leader) else None
        start = None
        if (
            self.leader is not None
            and self._serving(self.leader)
            and self.epoch > 0
            and self._epoch_asked != self.epoch
            and self.withhold_epoch_rounds <= 0
        ):
            start = self.brokers[self.leader].end_offset_for(self.epoch - 1)
            self._epoch_asked = self.epoch
        self.withhold_epoch_rounds -= 1
        if hw is not None:
            self.truth.shown_hw = max(self.truth.shown_hw, hw)
        self.tl.meta(
            leader=self.leader,
            epoch=self.epoch,
            replicas=list(self.replicas),
            isr=list(self.isr),
            hw=hw,
            epoch_start=start,
        )

    def events(self) -> list[dict[str, Any]]:
        """The collected stream, in the order the job applies it (time, then kind)."""
        return sorted(self.tl.events, key=lambda e: order_key(e["observed_at"], e["kind"]))
