"""The failure modes of ``shared/domain.md`` (and a healthy cluster) as event sequences.

Each scenario builds a :class:`~monitor.testing.Timeline`; ``python -m tests.scenarios``
writes them to ``tests/data/*.jsonl`` so a reader can ``monitor replay`` them (a test keeps
the files in sync). Brokers are numbered; "A" and "B" of the seeds are brokers 1 and 2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor.testing import Timeline

DATA = Path(__file__).parent / "data"
SECOND = 1_000


@dataclass
class Scenario:
    name: str
    why: str
    build: Callable[[], Timeline]
    #: ModelConfig overrides for the replay.
    config: dict[str, Any] = field(default_factory=dict)
    #: Findings that must appear: "kind:state" or "kind:state@broker".
    expect: list[str] = field(default_factory=list)
    #: Kinds that must not appear at all.
    forbid: list[str] = field(default_factory=list)
    #: Detail checks: (kind, key, value) on the first finding of that kind.
    details: list[tuple[str, str, Any]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return DATA / f"{self.name}.jsonl"


def seed1_hw_truncation() -> Timeline:
    """Seed failure mode 1: committed data lost by HW-based truncation.

    B (2) leads with HW 2; follower A (1) holds both messages but its HW is 1. A restarts and
    truncates to its HW (LEO 2 -> 1). B dies, A is elected (cleanly: it is in the ISR) and
    B comes back and truncates to A's log. Offset 1, once committed, is gone everywhere.
    """
    tl = Timeline(topic="seed1")
    tl.config(rf=2, min_isr=1)
    tl.meta(leader=2, epoch=0, replicas=[2, 1], isr=[2, 1], hw=0)
    tl.replica(2, leo=0)
    tl.replica(1, leo=0)
    tl.advance(SECOND)
    tl.replica(2, leo=2, hw=2)  # m0, m1 appended; A fetched both, leader HW advanced to 2
    tl.replica(1, leo=2, hw=1)  # A's own HW lags one fetch round
    tl.meta(leader=2, epoch=0, replicas=[2, 1], isr=[2, 1], hw=2)
    tl.advance(SECOND)
    tl.replica(1, leo=1)  # A restarted and truncated to its HW 1
    tl.advance(SECOND)
    tl.replica(1, leo=1)  # ... confirmed by a second sample
    tl.advance(SECOND)
    tl.broker(2, alive=False)  # B dies; A, still in the ISR, is elected
    tl.meta(leader=1, epoch=1, replicas=[2, 1], isr=[1], hw=1)
    tl.replica(1, leo=1, hw=1)
    tl.advance(SECOND)
    tl.broker(2, alive=True)  # B returns and truncates to A's HW
    tl.replica(2, leo=1)
    tl.advance(SECOND)
    tl.replica(2, leo=1)
    tl.meta(leader=1, epoch=1, replicas=[2, 1], isr=[1, 2], hw=1)
    return tl


def seed2_divergence() -> Timeline:
    """Seed failure mode 2: divergent logs (pre-epoch protocol).

    A (1) leads with LEO 2, HW 2: both messages committed. Both die; B (2) had not flushed
    m1 and comes back with LEO 1, is elected first and takes a new message at offset 1. A
    returns with LEO 2 and the same HW, does not truncate, and rejoins: offset 1 now holds
    different messages on A and B.
    """
    tl = Timeline(topic="seed2")
    tl.config(rf=2, min_isr=1)
    tl.meta(leader=1, epoch=0, replicas=[1, 2], isr=[1, 2], hw=0)
    tl.replica(1, leo=0)
    tl.replica(2, leo=0)
    tl.advance(SECOND)
    tl.replica(1, leo=2, hw=2)
    tl.replica(2, leo=2)
    tl.meta(leader=1, epoch=0, replicas=[1, 2], isr=[1, 2], hw=2)
    tl.advance(SECOND)
    tl.broker(1, alive=False)
    tl.broker(2, alive=False)
    tl.meta(leader=None, epoch=1, replicas=[1, 2], isr=[1, 2])
    tl.advance(SECOND)
    tl.broker(2, alive=True)
    tl.replica(2, leo=1)  # m1 was never flushed on B
    tl.meta(leader=2, epoch=2, replicas=[1, 2], isr=[2], hw=1)
    tl.advance(SECOND)
    tl.replica(2, leo=2, hw=2)  # a new message at offset 1
    tl.meta(leader=2, epoch=2, replicas=[1, 2], isr=[2], hw=2)
    tl.advance(SECOND)
    tl.broker(1, alive=True)
    tl.replica(1, leo=2)  # A is back, with its own offset 1, and does not truncate
    tl.meta(leader=2, epoch=2, replicas=[1, 2], isr=[2, 1], hw=2)
    tl.advance(SECOND)
    tl.replica(1, leo=2)
    tl.replica(2, leo=2, hw=2)
    return tl


def unclean_election() -> Timeline:
    """An out-of-sync replica is elected after the leader dies: committed offsets are lost.

    Follower 2 stops fetching at LEO 1000; Kafka drops it from the ISR; the leader goes on
    to HW 5000 alone (min ISR 1). Leader 1 dies (offline), then 2 is elected uncleanly.
    """
    tl = Timeline(topic="unclean")
    tl.config(rf=2, min_isr=1, unclean=True)
    leo = 1000
    tl.meta(leader=1, epoch=4, replicas=[1, 2], isr=[1, 2], hw=leo)
    tl.replica(1, leo=leo)
    tl.replica(2, leo=leo)
    for _ in range(8):  # follower 2 paused: only the leader reports
        tl.advance(5 * SECOND)
        leo += 500
        tl.replica(1, leo=leo)
        isr = [1, 2] if tl.now - 1_700_000_000_000 < 30 * SECOND else [1]
        tl.meta(leader=1, epoch=4, replicas=[1, 2], isr=isr, hw=leo if isr == [1] else 1000)
    tl.advance(5 * SECOND)
    tl.broker(1, alive=False)
    tl.meta(leader=None, epoch=5, replicas=[1, 2], isr=[1])
    tl.advance(5 * SECOND)
    tl.replica(2, leo=1000)  # 2 resumes, still at 1000
    tl.meta(leader=2, epoch=6, replicas=[1, 2], isr=[2], hw=1000)
    tl.advance(5 * SECOND)
    tl.replica(2, leo=1200, hw=1200)  # new writes land on the new leader
    tl.meta(leader=2, epoch=6, replicas=[1, 2], isr=[2], hw=1200)
    return tl


def old_leader_returns() -> Timeline:
    """After the unclean election, the old leader comes back still holding its 5000 offsets
    (ahead of the new leader), truncates to the new epoch's start (1000) and catches up --
    the leader-epoch protocol at work: no divergence, no new loss."""
    tl = unclean_election()
    for leo in (5000, 5000, 1000, 1300, 1400):  # two samples ahead, then truncated, caught up
        tl.advance(1_000)
        tl.broker(1, alive=True)
        tl.replica(2, leo=max(1300, leo if leo < 5000 else 1300), hw=1300)
        tl.replica(1, leo=leo)
    tl.meta(leader=2, epoch=6, replicas=[1, 2], isr=[2, 1], hw=1300)
    return tl


def under_min_isr_and_recovery() -> Timeline:
    """The ISR shrinks below min.insync.replicas (acks=all fails) and recovers."""
    tl = Timeline(topic="minisr")
    tl.config(rf=3, min_isr=2)
    for isr in ([1, 2, 3], [1, 2], [1], [1, 2], [1, 2, 3]):
        tl.meta(leader=1, epoch=0, replicas=[1, 2, 3], isr=isr, hw=100)
        tl.advance(5 * SECOND)
    return tl


def follower_stuck_in_isr() -> Timeline:
    """A follower stops fetching but is still listed in the ISR: HW stalls behind it.

    Kafka should have removed broker 3 after replica.lag.time.max.ms; the metadata still
    lists it, so acks=all writes wait on it and the HW does not move.
    """
    tl = Timeline(topic="stuck")
    tl.config(rf=3, min_isr=2)
    leo = 0
    for i in range(14):
        leo += 500
        tl.replica(1, leo=leo)
        tl.replica(2, leo=leo - 3)
        tl.replica(3, leo=min(leo, 2000))  # stuck at 2000 from the 4th round on
        shrunk = i >= 12
        tl.meta(
            leader=1,
            epoch=0,
            replicas=[1, 2, 3],
            isr=[1, 2] if shrunk else [1, 2, 3],
            hw=leo - 3 if shrunk else min(leo, 2000),
        )
        tl.advance(5 * SECOND)
    return tl


def broker_goes_silent() -> Timeline:
    """Broker 3 stops answering the collector; later partition 1 stops reporting entirely."""
    tl = Timeline(topic="silent")
    for i in range(30):
        for b in (1, 2, 3):
            if b != 3 or i < 6:
                tl.broker(b)
        for p in (0, 1):
            if p == 0 or i < 10:
                tl.meta(leader=1, epoch=0, replicas=[1, 2], isr=[1, 2], hw=10, partition=p)
        tl.advance(5 * SECOND)
    return tl


def leader_flapping() -> Timeline:
    """Leadership bounces between two brokers, four times in two minutes, then settles."""
    tl = Timeline(topic="flap")
    tl.config(rf=2, min_isr=1)
    for epoch in range(5):
        leader = 1 + epoch % 2
        tl.replica(1, leo=100)
        tl.replica(2, leo=100)
        tl.meta(leader=leader, epoch=epoch, replicas=[1, 2], isr=[1, 2], hw=100)
        tl.advance(30 * SECOND)
    for _ in range(25):  # quiet for 12.5 minutes
        tl.meta(leader=1, epoch=4, replicas=[1, 2], isr=[1, 2], hw=100)
        tl.advance(30 * SECOND)
    return tl


def durability_misconfigurations() -> Timeline:
    """Each usual misconfiguration of a topic's durability settings, and one CP topic."""
    tl = Timeline()
    tl.config(rf=1, min_isr=1, topic="rf1")
    tl.config(rf=3, min_isr=1, topic="minisr1")
    tl.config(rf=3, min_isr=3, topic="minisr-eq-rf")
    tl.config(rf=3, min_isr=2, unclean=True, topic="unclean-on")
    tl.config(rf=3, min_isr=2, topic="cp-ok")
    tl.advance(SECOND)
    tl.config(rf=3, min_isr=2, topic="minisr1")  # fixed
    return tl


def healthy_steady_state() -> Timeline:
    """Ten minutes of steady load: followers trail by a few offsets, HW trails the LEO."""
    tl = Timeline(topic="healthy")
    tl.config(rf=3, min_isr=2)
    leo = 0
    for i in range(120):
        leo += 5000
        for b in (1, 2, 3):
            tl.broker(b)
        tl.replica(1, leo=leo, hw=leo - 7)
        tl.advance(137)
        tl.replica(2, leo=leo - 4 + (i % 5) * 60)  # sampled 137 ms later: sometimes ahead
        tl.advance(211)
        tl.replica(3, leo=leo - 12)
        tl.meta(leader=1, epoch=7, replicas=[1, 2, 3], isr=[1, 2, 3], hw=leo - 9)
        tl.advance(5 * SECOND - 348)
    return tl


def same_round_skew() -> Timeline:
    """The 30-minute soak's false divergence: one stamp per collection round, and follower 1's
    exporter answers after leader 2's, so within a round the follower holds one offset more."""
    tl = Timeline(topic="skew")
    tl.config(rf=2, min_isr=1)
    leo = 10_000
    for _ in range(60):
        leo += 40
        for b in (1, 2):
            tl.broker(b)
        tl.replica(1, leo=leo + 1)  # read a moment after the leader's value
        tl.replica(2, leo=leo, hw=leo - 1)
        tl.meta(leader=2, epoch=4, replicas=[2, 1], isr=[2, 1], hw=leo - 1)
        tl.advance(2 * SECOND)
    return tl


def diverged_follower() -> Timeline:
    """Follower 2 holds offsets its leader does not, round after round (a broken log)."""
    tl = Timeline(topic="diverged")
    tl.config(rf=2, min_isr=1)
    leo = 5_000
    for _ in range(10):
        leo += 10
        tl.replica(1, leo=leo, hw=leo)
        tl.replica(2, leo=9_000)
        tl.meta(leader=1, epoch=3, replicas=[1, 2], isr=[1, 2], hw=leo)
        tl.advance(2 * SECOND)
    return tl


def hw_regression() -> Timeline:
    """HW goes back within an epoch, confirmed by a second sample; a lone glitch is not."""
    tl = Timeline(topic="hwreg")
    tl.config(rf=3, min_isr=2)
    for hw in (1000, 900, 1010, 1020, 800, 805):  # 900 is a glitch; 800, 805 are real
        tl.meta(leader=1, epoch=3, replicas=[1, 2, 3], isr=[1, 2, 3], hw=hw)
        tl.advance(5 * SECOND)
    return tl


def epoch_regression() -> Timeline:
    """The leader epoch goes back: the topic was deleted and recreated under the same name."""
    tl = Timeline(topic="recreated")
    tl.meta(leader=1, epoch=12, replicas=[1, 2], isr=[1, 2], hw=50_000)
    tl.advance(60 * SECOND)
    tl.meta(leader=2, epoch=0, replicas=[2, 1], isr=[2, 1], hw=0)
    tl.advance(5 * SECOND)
    tl.meta(leader=2, epoch=0, replicas=[2, 1], isr=[2, 1], hw=10)
    return tl


SCENARIOS: list[Scenario] = [
    Scenario(
        "seed1_hw_truncation",
        "A truncates below the committed HW, then leads: offset 1 is lost although the "
        "election was clean.",
        seed1_hw_truncation,
        expect=[
            "truncation_below_hw:event@1",
            "leader_election:event@1",
            "committed_data_loss:event",
            "isr_shrink:event",
            "isr_expand:event",
        ],
        forbid=["unclean_election", "hw_regression", "log_divergence"],
        details=[
            ("truncation_below_hw", "committed_offsets_removed", 1),
            ("committed_data_loss", "lost_count", 1),
            ("committed_data_loss", "lost_from", 1),
            ("committed_data_loss", "clean_election", True),
            ("leader_election", "clean", True),
        ],
    ),
    Scenario(
        "seed2_divergence",
        "Pre-epoch protocol: B's election loses committed offset 1, A rejoins without "
        "truncating, so the logs diverge from offset 1.",
        seed2_divergence,
        config={"epoch_truncation": False},
        expect=[
            "offline:open",
            "offline:resolved",
            "truncation_below_hw:event@2",  # B lost unflushed offset 1 in its restart
            "committed_data_loss:event",
            "log_divergence:open@1",
        ],
        forbid=["unclean_election", "hw_regression"],
        details=[
            ("committed_data_loss", "lost_count", 1),
            ("committed_data_loss", "new_leader", 2),
            ("log_divergence", "diverges_from", 1),
        ],
    ),
    Scenario(
        "seed2_with_leader_epochs",
        "The same sequence under the leader-epoch protocol: the committed loss is still "
        "reported, but A is known to truncate to the epoch start, so no divergence.",
        seed2_divergence,
        expect=["committed_data_loss:event"],
        forbid=["log_divergence", "unclean_election"],
    ),
    Scenario(
        "unclean_election",
        "Leader 2 was outside the last ISR [1]; it held up to 1000 of a committed 5000.",
        unclean_election,
        expect=[
            "follower_lag:open@2",
            "isr_shrink:event",
            "offline:open",
            "offline:resolved",
            "leader_election:event@2",
            "unclean_election:event@2",
            "committed_data_loss:event",
        ],
        forbid=["hw_regression", "truncation_below_hw"],
        details=[
            ("committed_data_loss", "lost_from", 1000),
            ("committed_data_loss", "lost_to", 5000),
            ("committed_data_loss", "lost_count", 4000),
            ("committed_data_loss", "clean_election", False),
            ("unclean_election", "isr_before", [1]),
        ],
    ),
    Scenario(
        "old_leader_returns",
        "The old leader returns ahead of the new one and truncates to the epoch start within "
        "seconds: the loss is reported once, and neither divergence nor a second truncation.",
        old_leader_returns,
        expect=["committed_data_loss:event", "isr_expand:event"],
        forbid=["log_divergence", "truncation_below_hw", "hw_regression"],
        details=[("committed_data_loss", "lost_count", 4000)],
    ),
    Scenario(
        "under_min_isr_and_recovery",
        "ISR 3 -> 2 (at min) -> 1 (under min: acks=all fails) -> 2 -> 3.",
        under_min_isr_and_recovery,
        expect=[
            "under_replicated:open",
            "at_min_isr:open",
            "under_min_isr:open",
            "under_min_isr:resolved",
            "at_min_isr:resolved",
            "under_replicated:resolved",
        ],
        forbid=["offline", "leader_election"],
        details=[("under_min_isr", "isr_size", 1), ("under_min_isr", "min_isr", 2)],
    ),
    Scenario(
        "follower_stuck_in_isr",
        "Broker 3 stops fetching but stays listed in the ISR for >30 s: follower lag while in "
        "ISR and a stalled HW; the shrink releases the HW.",
        follower_stuck_in_isr,
        expect=["follower_lag:open@3", "hw_lag:open", "hw_lag:resolved", "isr_shrink:event"],
        forbid=["follower_lag:open@2", "under_min_isr", "committed_data_loss"],
        details=[("follower_lag", "in_isr", True), ("follower_lag", "leo", 2000)],
    ),
    Scenario(
        "broker_goes_silent",
        "Broker 3 stops answering, then partition 1's metadata stops: both go stale.",
        broker_goes_silent,
        expect=["stale_telemetry:open@3", "stale_telemetry:open"],
        forbid=["stale_telemetry:open@1", "stale_telemetry:open@2"],
    ),
    Scenario(
        "leader_flapping",
        "Four elections in two minutes open leader_flapping; ten quiet minutes resolve it.",
        leader_flapping,
        expect=["leader_flapping:open", "leader_flapping:resolved", "leader_election:event@2"],
        forbid=["unclean_election", "committed_data_loss"],
    ),
    Scenario(
        "durability_misconfigurations",
        "RF 1, min ISR 1 with RF 3, min ISR = RF and unclean elections each open "
        "durability_risk; the CP topic stays quiet; fixing min ISR resolves its finding.",
        durability_misconfigurations,
        expect=["durability_risk:open", "durability_risk:resolved"],
    ),
    Scenario(
        "healthy_steady_state",
        "Sampling skew under load (a follower briefly 'ahead', HW a few offsets back) is not "
        "a finding.",
        healthy_steady_state,
        forbid=[
            "follower_lag",
            "hw_lag",
            "log_divergence",
            "hw_regression",
            "truncation_below_hw",
            "under_replicated",
            "stale_telemetry",
            "durability_risk",
        ],
    ),
    Scenario(
        "same_round_skew",
        "Within one collection round a follower read after its leader holds more: not a "
        "divergence (samples of one round have no order).",
        same_round_skew,
        forbid=["log_divergence", "follower_lag", "hw_regression", "truncation_below_hw"],
    ),
    Scenario(
        "diverged_follower",
        "A follower ahead of its leader across rounds: its log differs.",
        diverged_follower,
        expect=["log_divergence:open@2"],
        forbid=["committed_data_loss", "truncation_below_hw"],
        details=[("log_divergence", "leo", 9000)],
    ),
    Scenario(
        "hw_regression",
        "A single low HW sample is a glitch; two in a row are a regression of 220.",
        hw_regression,
        expect=["hw_regression:event"],
        details=[("hw_regression", "hw_before", 1020), ("hw_regression", "hw", 805)],
    ),
    Scenario(
        "epoch_regression",
        "Leader epoch 12 -> 0 a minute later: the topic was recreated; no loss is claimed.",
        epoch_regression,
        expect=["epoch_regression:event"],
        forbid=["hw_regression", "committed_data_loss", "leader_election"],
    ),
]


def write_all() -> None:
    DATA.mkdir(exist_ok=True)
    for sc in SCENARIOS:
        sc.path.write_text(sc.build().jsonl())


if __name__ == "__main__":
    write_all()
    print(f"wrote {len(SCENARIOS)} scenarios to {DATA}")
