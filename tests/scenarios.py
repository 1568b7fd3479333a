"""The failure modes of ``shared/domain.md`` (and a healthy cluster) as event sequences.

Each scenario builds a :class:`~monitor.dev.testing.Timeline`; ``python -m tests.scenarios``
writes them to ``tests/data/*.jsonl`` so a reader can ``monitor replay`` them (a test keeps
the files in sync). Brokers are numbered; "A" and "B" of the seeds are brokers 1 and 2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor.dev.testing import T0, Timeline
from monitor.model import ClusterModel, Finding, ModelConfig
from monitor.query.replay import replay

DATA = Path(__file__).parent / "data"
SECOND = 1_000


@dataclass
class Scenario:
    """One failure mode (or healthy case) and what the model must say about it.

    Findings are named by :func:`label`: ``"kind:state subject"``, where the subject is
    :attr:`Finding.subject` -- ``orders/0``, ``orders/0 broker 2``, ``topic orders``,
    ``broker 3``. So an expectation says *which* partition, topic or broker, and a finding
    on the wrong one does not pass.
    """

    name: str
    why: str
    build: Callable[[], Timeline]
    #: ModelConfig overrides for the replay.
    config: dict[str, Any] = field(default_factory=dict)
    #: Labels that must appear, exactly.
    expect: list[str] = field(default_factory=list)
    #: Patterns (see :func:`matches`) that no finding may match.
    forbid: list[str] = field(default_factory=list)
    #: Detail checks: (pattern, key, value) on the first finding matching the pattern.
    details: list[tuple[str, str, Any]] = field(default_factory=list)
    #: A routine operation (failover, restart, reassignment, recreation): no finding of it
    #: may be critical -- a page there is a false page.
    routine: bool = False
    #: The lines the replay must reject, as {line number: a part of the reason}.
    rejects: dict[int, str] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return DATA / f"{self.name}.jsonl"


def accepted_lines(sc: Scenario) -> list[bytes]:
    """The scenario file's lines, without those the contract refuses (a scenario may hold
    records it must reject: :attr:`Scenario.rejects`), for tests that feed them onward."""
    from monitor.contract.events import EventError, parse_event

    out = []
    for line in sc.path.read_bytes().splitlines():
        try:
            parse_event(line)
        except EventError:
            continue
        out.append(line)
    return out


def run(sc: Scenario) -> list[Finding]:
    """The findings of ``monitor replay`` on the scenario's file; exactly the lines it names
    rejected (``Scenario.rejects``), for the reasons it names."""
    findings: list[Finding] = []
    rejects: list[tuple[int, str]] = []
    stats = replay(
        sc.path.read_bytes().splitlines(),
        ClusterModel(ModelConfig(**sc.config)),
        findings.append,
        lambda n, r: rejects.append((n, r)),
    )
    # Exactly the lines the scenario says, each for its reason.
    assert sorted(n for n, _ in rejects) == sorted(sc.rejects), rejects
    assert all(sc.rejects[n] in reason for n, reason in rejects), rejects
    assert stats.accepted + len(rejects) == stats.lines > 0
    return findings


def label(f: Finding) -> str:
    """``kind:state subject``, e.g. ``follower_lag:open stuck/0 broker 3``."""
    return f"{f.kind}:{f.state} {f.subject}"


def matches(pattern: str, lab: str) -> bool:
    """Whether a label matches a pattern ``kind[:state] [subject]``.

    Without a subject the pattern matches that kind (and state) anywhere; a subject must
    be equal, or end in ``*`` to match as a prefix (``stuck/0*``: the partition and its
    brokers).

    >>> matches("follower_lag", "follower_lag:open stuck/0 broker 3")
    True
    >>> matches("follower_lag:open stuck/0 broker 2", "follower_lag:open stuck/0 broker 3")
    False
    >>> matches("durability_risk topic cp-ok", "durability_risk:open topic cp-ok")
    True
    """
    head, _, subject = pattern.partition(" ")
    lab_head, _, lab_subject = lab.partition(" ")
    if lab_head != head and not lab_head.startswith(head + ":"):
        return False
    if not subject:
        return True
    if subject.endswith("*"):
        return lab_subject.startswith(subject[:-1])
    return lab_subject == subject


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
    # its epoch record (OffsetsForLeaderEpoch): the epoch began at its log end, 1000
    tl.meta(leader=2, epoch=6, replicas=[1, 2], isr=[2], hw=1000, epoch_start=1000)
    tl.advance(5 * SECOND)
    tl.replica(2, leo=1200, hw=1200)  # new writes land on the new leader
    tl.meta(leader=2, epoch=6, replicas=[1, 2], isr=[2], hw=1200)
    return tl


def unclean_election_admin_only() -> Timeline:
    """The unclean election of :func:`unclean_election`, seen by a collector that reads the
    Admin API only (a managed cluster without JMX): no replica samples; each round's broker
    events say who the cluster metadata lists. The epoch record alone gives the loss."""
    tl = Timeline(topic="unclean")
    tl.config(rf=2, min_isr=1, unclean=True)
    hw = 1000
    tl.broker(1), tl.broker(2)
    tl.meta(leader=1, epoch=4, replicas=[1, 2], isr=[1, 2], hw=hw)
    for i in range(8):  # follower 2 stopped fetching; Kafka drops it from the ISR
        tl.advance(5 * SECOND)
        shrunk = i >= 5
        hw = hw + 500 if shrunk else hw
        tl.broker(1), tl.broker(2)
        tl.meta(leader=1, epoch=4, replicas=[1, 2], isr=[1] if shrunk else [1, 2], hw=hw)
    tl.advance(5 * SECOND)
    tl.broker(1, alive=False), tl.broker(2)  # 1 dies: no longer listed
    tl.meta(leader=None, epoch=5, replicas=[1, 2], isr=[1])
    tl.advance(5 * SECOND)
    tl.broker(1, alive=False), tl.broker(2)
    tl.meta(leader=2, epoch=6, replicas=[1, 2], isr=[2], hw=1000, epoch_start=1000)
    tl.advance(5 * SECOND)
    tl.broker(1, alive=False), tl.broker(2)
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


def _rounds(
    tl: Timeline,
    n: int,
    leo: int,
    *,
    leader: int,
    epoch: int,
    isr: list[int],
    jmx: tuple[int, ...] = (1, 2, 3),
    rate: int = 5_000,
    hw_ahead: int = 0,
) -> int:
    """``n`` collection rounds the way ``monitor collect`` stamps them: every broker's JMX
    page stamped with the round's start (followers a fetch, 5 offsets, behind the leader),
    the partition event 2 ms later with the leader's HW -- read ``hw_ahead`` offsets later
    than the pages (at 1000 offsets/s, 40 is 40 ms). Returns the leader's LEO after them."""
    for _ in range(n):
        leo += rate
        for b in jmx:
            tl.broker(b)
            tl.replica(b, leo=leo if b == leader else leo - 5)
        tl.advance(2)
        tl.meta(leader=leader, epoch=epoch, replicas=[1, 2, 3], isr=isr, hw=leo + hw_ahead)
        tl.advance(5 * SECOND - 2)
    return leo


def clean_election_blind_round() -> Timeline:
    """A clean failover while the collector is half blind (issue 16's false loss).

    Leader 1 dies; broker 2, in the ISR and caught up, is elected. In the election round 2's
    JMX scrape times out (busy taking over) and its epoch record request fails, so its last
    LEO sample is from the round before -- stamped 2 ms *before* that round's HW, which was
    read 40 ms later (40 more offsets replicated). The model used to judge the election on
    that sample and page a loss of 45 offsets.
    """
    tl = Timeline(topic="blind")
    tl.config(rf=3, min_isr=2)
    leo = _rounds(tl, 4, 100_000, leader=1, epoch=5, isr=[1, 2, 3], hw_ahead=40)
    leo += 5_000  # 1 wrote a last round, all replicated, then died
    tl.broker(1, alive=False)
    tl.broker(2, alive=False)  # its scrape timed out
    tl.broker(3)
    tl.replica(3, leo=leo)
    tl.advance(2)
    tl.meta(leader=2, epoch=6, replicas=[1, 2, 3], isr=[2, 3], hw=leo)  # no epoch record
    tl.advance(5 * SECOND - 2)
    _rounds(tl, 3, leo, leader=2, epoch=6, isr=[2, 3], jmx=(2, 3), hw_ahead=40)
    return tl


def clean_failover_admin_only() -> Timeline:
    """A rolling restart seen through the Admin API only (no JMX): leader 1 stops, 2 (in the
    ISR) takes over -- its epoch record unread in that round, read in the next -- 1 comes
    back; then follower 3 restarts. The only evidence of the election is the epoch record
    (where 2's epoch began: every committed offset, as an ISR member holds them)."""
    tl = Timeline(topic="adminroll")
    tl.config(rf=3, min_isr=2)
    hw = 10_000

    def round_(leader: int, epoch: int, isr: list[int], down: int | None = None,
               epoch_start: int | None = None) -> None:  # fmt: skip
        nonlocal hw
        for b in (1, 2, 3):
            tl.broker(b, alive=b != down)
        tl.meta(leader=leader, epoch=epoch, replicas=[1, 2, 3], isr=isr, hw=hw,
                epoch_start=epoch_start)  # fmt: skip
        tl.advance(5 * SECOND)
        hw += 500

    for _ in range(4):
        round_(1, 5, [1, 2, 3])
    round_(2, 6, [2, 3], down=1)  # the failover round: no epoch record yet
    round_(2, 6, [2, 3], down=1, epoch_start=hw - 500)  # 2's epoch began at the last HW
    round_(2, 6, [2, 3, 1])
    round_(2, 6, [2, 1], down=3)
    for _ in range(3):
        round_(2, 6, [2, 1, 3])
    return tl


def unclean_old_leader_rejoined() -> Timeline:
    """Unclean election hidden by a rejoin (issue 16): ISR [1] -> leader 2, ISR [2, 1].

    Follower 2 is paused and drops out of the ISR; 1 commits alone up to 5400. 1 dies, 2 is
    elected uncleanly (it holds 1000), and 1 comes back and rejoins the ISR -- all between
    two collection rounds. The metadata then shows 2 leading with 1 in the ISR: a member of
    the last ISR is in the new one, which the model used to take for a clean election.
    """
    tl = Timeline(topic="rejoined")
    tl.config(rf=2, min_isr=1, unclean=True)
    leo = 1_000
    tl.meta(leader=1, epoch=4, replicas=[1, 2], isr=[1, 2], hw=leo)
    tl.replica(1, leo=leo)
    tl.replica(2, leo=leo)
    for _ in range(9):
        tl.advance(5 * SECOND)
        leo += 490
        tl.replica(1, leo=leo)
        isr = [1, 2] if tl.now - T0 < 30 * SECOND else [1]
        tl.meta(leader=1, epoch=4, replicas=[1, 2], isr=isr, hw=leo if isr == [1] else 1_000)
    tl.advance(5 * SECOND)
    tl.replica(2, leo=1_000)
    tl.meta(leader=2, epoch=5, replicas=[1, 2], isr=[2, 1], hw=1_000, epoch_start=1_000)
    tl.advance(5 * SECOND)
    tl.replica(2, leo=1_300)
    tl.replica(1, leo=1_300)
    tl.meta(leader=2, epoch=5, replicas=[1, 2], isr=[2, 1], hw=1_300)
    return tl


def broker_restart_no_flicker() -> Timeline:
    """A follower's clean restart (issue 16's flicker): broker 3 is down for six rounds and
    back caught up. In its first round back the leader's sample comes first; judged against
    3's last sample from before the restart it looked 3 rounds behind -- follower_lag opened,
    and 3's own fresh sample resolved it in the same millisecond."""
    tl = Timeline(topic="restart")
    tl.config(rf=3, min_isr=2)
    leo = _rounds(tl, 3, 10_000, leader=1, epoch=2, isr=[1, 2, 3])
    # 3 restarting for six rounds: its last sample is 35 s old when it is back, just past
    # replica.lag.time.max.ms -- but not during its absence (30 s is not yet "behind for
    # longer than 30 s")
    leo = _rounds(tl, 6, leo, leader=1, epoch=2, isr=[1, 2], jmx=(1, 2))
    _rounds(tl, 3, leo, leader=1, epoch=2, isr=[1, 2, 3])  # back, caught up
    return tl


def election_without_evidence() -> Timeline:
    """A new leader, and for a minute nothing says what it held: its JMX endpoint is down
    and its epoch record keeps failing. The election is pending -- never paged -- and then
    reported as election_unverified: the loss is unknown."""
    tl = Timeline(topic="unknown")
    tl.config(rf=3, min_isr=2)
    leo = _rounds(tl, 3, 50_000, leader=1, epoch=3, isr=[1, 2, 3])
    tl.broker(1, alive=False)
    tl.advance(2)
    tl.meta(leader=3, epoch=4, replicas=[1, 2, 3], isr=[2, 3], hw=leo)
    tl.advance(5 * SECOND - 2)
    for _ in range(14):  # 70 s: 2 and 3 answer the Admin API, their exporters do not
        tl.advance(2)
        tl.meta(leader=3, epoch=4, replicas=[1, 2, 3], isr=[2, 3], hw=leo)
        tl.advance(5 * SECOND - 2)
    return tl


def stale_former_leader_elected() -> Timeline:
    """A former leader elected back uncleanly still holds its own epoch's suffix.

    3 leads epoch 1 and writes up to 4000, of which 3000 are committed; it dies. 2 is
    elected at 3000 (epoch 2) and the HW moves on to 6000 under it. 2 dies too and the
    stale 3 -- never back since, so never truncated -- is elected uncleanly. Its log end
    (4000) is above 3000, but [3000, 4000) is epoch 1's uncommitted suffix, not the
    committed records of epoch 2: everything committed from 3000 on is lost.
    """
    tl = Timeline(topic="stale")
    tl.config(rf=3, min_isr=1, unclean=True)
    tl.meta(leader=3, epoch=1, replicas=[3, 2, 1], isr=[3, 2], hw=3_000)
    tl.replica(3, leo=4_000)
    tl.replica(2, leo=3_000)
    tl.advance(5 * SECOND)
    tl.broker(3, alive=False)
    tl.meta(leader=2, epoch=2, replicas=[3, 2, 1], isr=[2], hw=3_000, epoch_start=3_000)
    for leo in (4_500, 6_000):
        tl.advance(5 * SECOND)
        tl.replica(2, leo=leo)
        tl.meta(leader=2, epoch=2, replicas=[3, 2, 1], isr=[2], hw=leo)
    tl.advance(5 * SECOND)
    tl.broker(2, alive=False)
    tl.broker(3)
    tl.replica(3, leo=4_000)
    tl.meta(leader=3, epoch=3, replicas=[3, 2, 1], isr=[3], hw=3_000, epoch_start=4_000)
    return tl


def controller_counts_unclean_election() -> Timeline:
    """Three controllers report UncleanLeaderElectionsPerSec every 5 s; the partition the
    monitor collects stays healthy. At 70 s controller 3 restarts: silent for a round, then
    back with its counter at 2 (it replayed the metadata log) and 3 five seconds later, still
    replaying. At 90 s an unclean election the monitor has no partition evidence for (a
    topic it does not collect): every controller's counter rises by one (standbys count
    too). Only the counters warm for 30 s are believed: 1 and 2 report it, 3 does not. At
    100 s controller 2 restarts between two scrapes (no gap seen) and replays two more old
    elections: its counter 1 -> 3 with a new process start is a baseline, not an election."""
    tl = Timeline(topic="counted")
    counts = {1: 0, 2: 0, 3: 0}
    started = {b: tl.now - 3_600_000 for b in (1, 2, 3)}
    for i in range(26):
        t_s = i * 5
        if t_s == 90:
            counts = {b: n + 1 for b, n in counts.items()}
        if t_s == 75:
            started[3] = tl.now - 3_000
        if t_s == 100:
            started[2], counts[2] = tl.now - 2_000, counts[2] + 2
        for b in (1, 2, 3):
            if b == 3 and t_s == 70:
                tl.broker(3, alive=False)
                continue
            n = counts[b]
            if b == 3 and t_s >= 75:
                n += 2 if t_s == 75 else 3  # the replayed old elections
            tl.broker(b, unclean_elections_total=n, active_controller=b == 1, started_at=started[b])
        tl.meta(leader=1, epoch=0, replicas=[1, 2, 3], isr=[1, 2, 3], hw=100)
        tl.advance(5 * SECOND)
    return tl


#: Two incarnations of one topic name (Kafka's topic ids: 22 characters of base64url).
TOPIC_ID_OLD = "kDqT6kqVQnC4mA8-cUxTwQ"
TOPIC_ID_NEW = "Yx2Zt3PqRkWm0aBcDeFgHw"


def future_stamped_event() -> Timeline:
    """A 3-replica topic (min ISR 2) under load; in its third round one ``partition`` event
    is stamped a year ahead (a collector whose clock jumped, or a bad producer). Then, on
    time, the followers fall out of the ISR one by one and the leader goes offline. Each
    round the brokers' own samples come first, as from the collector."""
    tl = Timeline(topic="ahead")
    tl.config(rf=3, min_isr=2)
    hw = 1_000
    isrs = [[1, 2, 3]] * 4 + [[1, 2], [1, 2], [1], [1]]
    leo = {1: hw, 2: hw, 3: hw}
    for i, isr in enumerate(isrs):
        for b in (1, 2, 3):
            leo[b] = hw if b in isr else leo[b]  # out of the ISR: stopped fetching
            tl.broker(b)
            tl.replica(b, leo=leo[b], hw=hw if b == 1 else None)
        tl.advance(2)
        tl.meta(leader=1, epoch=2, replicas=[1, 2, 3], isr=isr, hw=hw)
        if i == 2:
            year = 365 * 24 * 3600 * SECOND
            tl.advance(year)
            tl.meta(leader=1, epoch=2, replicas=[1, 2, 3], isr=isr, hw=hw)
            tl.advance(-year)
        tl.advance(5 * SECOND - 2)
        hw += 100 if len(isr) > 1 else 0
    tl.meta(leader=None, epoch=3, replicas=[1, 2, 3], isr=[1], hw=hw)
    return tl


def impossible_partition_records() -> Timeline:
    """A 3-replica topic (min ISR 2) under load whose followers fall out of the ISR one by
    one; among the collector's rounds, three partition records Kafka could never give (a
    collector's bug): the ISR ``[1, 1]`` when it is ``[1]``, a leader outside the replicas,
    a replica listed twice."""
    tl = Timeline(topic="impossible")
    tl.config(rf=3, min_isr=2)
    hw = 1_000
    isrs = [[1, 2, 3]] * 3 + [[1, 2]] * 2 + [[1]] * 3
    leo = {1: hw, 2: hw, 3: hw}
    for i, isr in enumerate(isrs):
        for b in (1, 2, 3):
            leo[b] = hw if b in isr else leo[b]  # out of the ISR: stopped fetching
            tl.replica(b, leo=leo[b], hw=hw if b == 1 else None)
        tl.advance(2)
        if i == 1:
            tl.meta(leader=4, epoch=2, replicas=[1, 2, 3], isr=isr, hw=hw)  # not a replica
        elif i == 3:
            tl.meta(leader=1, epoch=2, replicas=[1, 2, 2], isr=isr, hw=hw)  # 2 twice
        elif i == 5:
            tl.meta(leader=1, epoch=2, replicas=[1, 2, 3], isr=[1, 1], hw=hw)  # 1 twice
        else:
            tl.meta(leader=1, epoch=2, replicas=[1, 2, 3], isr=isr, hw=hw)
        tl.advance(5 * SECOND - 2)
        hw += 100 if len(isr) > 1 else 0
    return tl


def _round(tl: Timeline, topic: str, hw: int, isr: list[int], meta: bool = True) -> None:
    """One collector round of an RF 3 topic led by broker 1: samples, then metadata."""
    for b in (1, 2, 3):
        # out of the ISR: stopped fetching at 1000
        tl.replica(b, leo=hw if b in isr else min(hw, 1000), hw=hw if b == 1 else None, topic=topic)
    tl.advance(2)
    if meta:
        tl.meta(leader=1, epoch=1, replicas=[1, 2, 3], isr=isr, hw=hw, topic=topic)
    tl.advance(-2)


def impossible_samples_held() -> Timeline:
    """Healthy partitions under load, each given one impossible sample (issue 50): an HW of
    10^12 (partition 0), a leader log end of 10^12 (partition 1), an epoch of 2^31-1
    (partition 2) -- then normal rounds again."""
    tl = Timeline(topic="spiky")
    tl.config(rf=3, min_isr=2)
    leo = 10_000
    for i in range(12):
        leo += 1_000
        for p in (0, 1, 2):
            for b in (1, 2, 3):
                spike = p == 1 and b == 1 and i == 5
                tl.replica(b, leo=10**12 if spike else leo - (0 if b == 1 else 5), partition=p)
            tl.advance(1)
            tl.meta(
                leader=1, epoch=2**31 - 1 if p == 2 and i == 5 else 3, replicas=[1, 2, 3],
                isr=[1, 2, 3], hw=10**12 if p == 0 and i == 5 else leo - 5, partition=p,
            )  # fmt: skip
        tl.advance(5 * SECOND - 3)
    return tl


def broker_restarts_between_reads() -> Timeline:
    """Broker 3 restarts between two rounds (a new process start, never seen down): the
    leader drops it from the ISR while it starts, and the round after shows both."""
    tl = Timeline(topic="bounce")
    tl.config(rf=3, min_isr=2)
    leo = 5_000
    for i in range(6):
        leo += 500
        restarted = i >= 3
        for b in (1, 2, 3):
            tl.broker(b, started_at=T0 + 14_000 if b == 3 and restarted else T0 - 3_600_000)
            if not (b == 3 and i == 3):
                tl.replica(b, leo=leo - (0 if b == 1 else 5))
        tl.advance(1)
        isr = [1, 2] if i == 3 else [1, 2, 3]
        tl.meta(leader=1, epoch=2, replicas=[1, 2, 3], isr=isr, hw=leo - 5)
        tl.advance(5 * SECOND - 1)
    return tl


def topic_deleted() -> Timeline:
    """Two topics; broker 3 has fallen out of the ISR of ``gone`` (under-replicated, at
    min ISR). ``gone`` is deleted: the collector's metadata read no longer lists it and it
    says so. A replica sample of ``gone`` taken before the deletion arrives after it. The
    other topic goes on for three minutes; then ``gone`` is created again, offsets from 0."""
    tl = Timeline(topic="gone")
    tl.config(rf=3, min_isr=2)
    tl.config(rf=3, min_isr=2, topic="kept")
    for i in range(4):
        _round(tl, "gone", 1_000 + 100 * i, [1, 2] if i >= 1 else [1, 2, 3])
        _round(tl, "kept", 500 + 100 * i, [1, 2, 3])
        tl.advance(5 * SECOND)
    tl.advance(-SECOND)
    late = tl.replica(3, leo=1_000, topic="gone")  # sampled before the deletion...
    tl.events.remove(late)
    tl.advance(SECOND)
    tl.deleted()
    for i in range(36):
        tl.advance(5 * SECOND)
        if i % 6 == 0:
            tl.config(rf=3, min_isr=2, topic="kept")
        _round(tl, "kept", 900 + 100 * i, [1, 2, 3])
        if i == 1:
            tl.events.append(late)  # ...arrives two rounds after it
    tl.advance(5 * SECOND)
    tl.config(rf=3, min_isr=2)
    for i in range(3):  # created again: a new history
        _round(tl, "gone", 10 * i, [1, 2, 3])
        tl.advance(5 * SECOND)
    return tl


def topic_absent_from_metadata() -> Timeline:
    """As ``topic_deleted``, but the deletion signal was lost (the collector restarted across
    the deletion and never knew the topic): the metadata reads simply stop listing
    ``absent`` while they go on listing ``kept`` (and its configuration) every round."""
    tl = Timeline(topic="absent")
    for i in range(4):
        tl.config(rf=3, min_isr=2)
        tl.config(rf=3, min_isr=2, topic="kept")
        _round(tl, "absent", 1_000 + 100 * i, [1, 2] if i >= 1 else [1, 2, 3])
        _round(tl, "kept", 500 + 100 * i, [1, 2, 3])
        tl.advance(5 * SECOND)
    for i in range(64):  # ten minutes and a half, a round every 10 s
        tl.config(rf=3, min_isr=2, topic="kept")
        _round(tl, "kept", 900 + 100 * i, [1, 2, 3])
        tl.advance(10 * SECOND)
    return tl


def collector_gap() -> Timeline:
    """An RF 3 topic under steady load, its HW keeping up with the leader each round. The
    collector stops for 40 s (restarted, or its events broker restarting) -- longer than
    ``hw_lag_ms`` -- and resumes: the first round brings the leader's new LEO 2 ms before the
    metadata with the HW that matches it."""
    tl = Timeline(topic="gap")
    tl.config(rf=3, min_isr=2)
    hw = 1_000
    for i in range(12):
        for b in (1, 2, 3):
            tl.replica(b, leo=hw + 300)  # 300 in flight; the exporter pages say no HW
        tl.advance(2)
        tl.meta(leader=1, epoch=1, replicas=[1, 2, 3], isr=[1, 2, 3], hw=hw)
        tl.advance((40 if i == 5 else 5) * SECOND - 2)
        hw += 500 if i != 5 else 4_000
    return tl


def topic_recreated() -> Timeline:
    """A 3-replica topic under 100 records/s at epoch 3 is deleted and recreated with the
    same name 8 s later (as on the real lab: Admin API delete, create): the new incarnation
    has a new topic id, epoch 0, offsets from 0 -- and its replicas' samples (JMX has no
    topic id) come 2 ms before the metadata that says so. The same round shape as the
    collector's: replica samples at T, the partition event at T + 2."""
    return _recreation(Timeline(topic="recreated"), gap_rounds=1, blind_rounds=0)


def topic_recreated_metadata_late() -> Timeline:
    """As ``topic_recreated``, recreated within one round, but the metadata reads fail for
    the two rounds after it: the replicas' samples of the new incarnation (LEO 55, then 555)
    come twice before any metadata says the topic id changed. Two low samples of a replica
    are no truncation while no metadata vouched for the incarnation between them."""
    return _recreation(Timeline(topic="late"), gap_rounds=0, blind_rounds=2)


def _recreation(tl: Timeline, gap_rounds: int, blind_rounds: int) -> Timeline:
    tl.config(rf=3, min_isr=2)
    hw = 4_000
    for _ in range(4):
        for b in (1, 2, 3):
            tl.replica(b, leo=hw + 3, hw=hw if b == 1 else None)
        tl.advance(2)
        tl.meta(leader=1, epoch=3, replicas=[1, 2, 3], isr=[1, 2, 3], hw=hw, topic_id=TOPIC_ID_OLD)
        tl.advance(5 * SECOND - 2)
        hw += 500
    tl.advance(gap_rounds * 5 * SECOND)  # deleted: gone from metadata and the exporters
    new = 55
    for i in range(10):
        for b in (1, 2, 3):
            tl.replica(b, leo=new, hw=new if b == 1 else None)
        tl.advance(2)
        if i >= blind_rounds:
            tl.meta(
                leader=1, epoch=0, replicas=[1, 2, 3], isr=[1, 2, 3], hw=new,
                topic_id=TOPIC_ID_NEW,
            )  # fmt: skip
        tl.advance(5 * SECOND - 2)
        new += 500
    return tl


def reassignment_unsaid_in_its_first_read() -> Timeline:
    """:func:`throttled_reassignment`, but its first round's read of the reassignments (a
    separate Admin request) did not show it yet: the replicas grew to [1, 2, 4, 3], no
    adding or removing said (a CI run of the churn lab test)."""
    return _throttled_reassignment("unsaid", said_from=3)


def throttled_reassignment() -> Timeline:
    return _throttled_reassignment("moved")


def _throttled_reassignment(topic: str, said_from: int = 2) -> Timeline:
    """Cruise Control moves replica 3 to broker 4 under a replication throttle (KIP-455):
    the assignment becomes [1, 2, 4, 3] with adding [4] and removing [3] while 4 copies the
    log, 2500 offsets a round while the leader takes 1000 (45 s, not caught up); then 4
    joins the ISR and the controller completes it: [1, 2, 4]. Broker 3's exporter still
    shows its old log for a while (deleted later). Kafka reports no under-replicated
    partition throughout. The reads of the reassignments show it from round ``said_from``
    (the move begins at round 2; before, the field is not said at all)."""
    tl = Timeline(topic=topic)
    tl.config(rf=3, min_isr=2)
    leo = 20_000
    copied = 0
    for i in range(30):
        moving = 2 <= i < 12
        done = i >= 12
        replicas = [1, 2, 4] if done else [1, 2, 4, 3] if moving else [1, 2, 3]
        isr = [1, 2, 4] if done else [1, 2, 4, 3] if i == 11 else [1, 2, 3]
        for b in (1, 2, 3):
            tl.replica(b, leo=leo, hw=leo if b == 1 else None)
        if moving or done:
            copied = leo if i >= 11 else min(leo, copied + 2_500)
            tl.replica(4, leo=copied)
        tl.advance(2)
        said = not moving or i >= said_from
        tl.meta(
            leader=1, epoch=5, replicas=replicas, isr=isr, hw=leo,
            adding=([4] if moving else []) if said else None,
            removing=([3] if moving else []) if said else None,
        )  # fmt: skip
        tl.advance(5 * SECOND - 2)
        leo += 1_000
    return tl


def reassignment_moves_the_leader() -> Timeline:
    """A reassignment that removes the leader (as found on the real lab): [2, 1] -> [3, 1].
    Broker 3 copies the log; when it has caught up, KRaft adds it to the ISR and makes it
    leader in one metadata change (ISR [2, 1] -> leader 3, ISR [1, 3]): a leader outside the
    last ISR, but a clean handover -- its epoch starts at the committed HW."""
    tl = Timeline(topic="handover")
    tl.config(rf=2, min_isr=1)
    leo = 50_000
    copied = 0
    for i in range(16):
        moving, done = 1 <= i < 8, i >= 8
        for b in (2, 1) if not done else (1,):
            tl.replica(b, leo=leo, hw=leo if b == 2 else None)
        if moving or done:
            copied = leo if i >= 7 else copied + 8_000
            tl.replica(3, leo=copied, hw=leo if done else None)
        tl.advance(2)
        if done:
            tl.meta(
                leader=3, epoch=7, replicas=[3, 1], isr=[1, 3], hw=leo,
                epoch_start=50_000 + 7 * 500, adding=[] if i == 8 else None,
                removing=[] if i == 8 else None,
            )  # fmt: skip
        else:
            tl.meta(
                leader=2, epoch=6, replicas=[3, 1, 2] if moving else [2, 1], isr=[2, 1], hw=leo,
                adding=[3] if moving else [], removing=[2] if moving else [],
            )  # fmt: skip
        tl.advance(5 * SECOND - 2)
        leo += 500
    return tl


def reassignment_replaces_every_replica() -> Timeline:
    """Moves that keep none of the old replicas: partition 0 (RF 1) from [2] to [3],
    partition 1 (RF 2) from [1, 2] to [3, 4]. When the new replicas have caught up, KRaft
    adds them to the ISR and makes one leader in the same change: the new leader and ISR
    hold none of the last ISR -- only the reassignment says who they are."""
    tl = Timeline(topic="replaced")
    tl.config(rf=1, min_isr=1)
    leo = 10_000
    moves = {0: ([2], [3]), 1: ([1, 2], [3, 4])}
    for i in range(12):
        moving, done = 1 <= i < 6, i >= 6
        for p, (old, new) in moves.items():
            for b in old if not done else ():
                tl.replica(b, leo=leo, hw=leo if b == old[0] else None, partition=p)
            for b in new if (moving or done) else ():
                tl.replica(b, leo=leo if i >= 5 else leo - 2_000, partition=p)
            tl.advance(1)
            if done:
                tl.meta(
                    leader=new[0], epoch=3, replicas=new, isr=new, hw=leo, partition=p,
                    epoch_start=10_000 + 5 * 500 if i == 6 else None,
                )  # fmt: skip
            else:
                tl.meta(
                    leader=old[0], epoch=2, replicas=new + old if moving else old, isr=old,
                    hw=leo, partition=p, adding=new if moving else [],
                    removing=old if moving else [],
                )  # fmt: skip
        tl.advance(5 * SECOND - 2)
        leo += 500
    return tl


def reassignment_between_reads() -> Timeline:
    """Moves that begin and end between two metadata reads (a small partition copies in
    seconds; decommissioning a broker moves many): partition 0 (RF 1) from [2] to [3],
    partition 1 (RF 3) from [1, 2, 3] to [4, 5, 6]. No read sees the adding replicas; the
    next shows a new leader outside the last ISR, with none of it in the new one -- but a
    broker that was not a replica at all, which no election of Kafka's own would pick."""
    tl = Timeline(topic="moved")
    tl.config(rf=3, min_isr=1)
    leo = 10_000
    moves = {0: ([2], [3]), 1: ([1, 2, 3], [4, 5, 6])}
    for i in range(10):
        done = i >= 5
        for p, (old, new) in moves.items():
            for b in new if done else old:
                lead = b == (new if done else old)[0]
                tl.replica(b, leo=leo, hw=leo if lead else None, partition=p)
            tl.advance(1)
            replicas = new if done else old
            tl.meta(
                leader=replicas[0], epoch=3 if done else 2, replicas=replicas, isr=replicas,
                hw=leo, partition=p, epoch_start=leo - 500 if i == 5 else None,
            )  # fmt: skip
        tl.advance(5 * SECOND - 2)
        leo += 500
    return tl


def follower_disk_replaced() -> Timeline:
    """A follower's disk is replaced: broker 3 stops, comes back with an empty log and
    copies the partition from the leader's log start (80,000) until it rejoins the ISR.
    Its log end goes from 119,995 far below the committed HW -- the leader and broker 2
    still hold every committed offset."""
    tl = Timeline(topic="disk")
    tl.config(rf=3, min_isr=2)
    leo = _rounds(tl, 4, 100_000, leader=1, epoch=5, isr=[1, 2, 3])
    isr = [1, 2]
    copied = 80_000
    for i in range(12):
        leo += 5_000
        for b in (1, 2):
            tl.broker(b)
            tl.replica(b, leo=leo if b == 1 else leo - 5)
        if i < 3:
            tl.broker(3, alive=False)
        else:
            copied = min(leo - 5, copied + 15_000)
            tl.broker(3)
            tl.replica(3, leo=copied)
            if copied == leo - 5:
                isr = [1, 2, 3]
        tl.advance(2)
        tl.meta(leader=1, epoch=5, replicas=[1, 2, 3], isr=isr, hw=leo - 5)
        tl.advance(5 * SECOND - 2)
    return tl


def _elr_election(
    topic: str, shrunk: list[int] | None, elected: list[int] | None, start_known: bool
) -> Timeline:
    """Brokers 3 then 2 stop; the ISR shrinks below min ISR 2 to [1] and the controller
    keeps 2 in the ELR (KIP-966: it held the committed HW when it left); the read after
    that carries no ELR (a Metadata API fallback). Then 1 stops and 2, back, is elected
    from the ELR -- clean. ``shrunk``: the ELR the shrinking read says (None: not
    reported); ``elected``: the ELR the election's reads say; ``start_known``: the
    election's read has the epoch record (the epoch begins at the committed HW)."""
    tl = Timeline(topic=topic)
    tl.config(rf=3, min_isr=2)
    leo = 100_000

    def round(isr: list[int], elr: list[int] | None, leader: int = 1, epoch: int = 4,
              start: int | None = None) -> None:  # fmt: skip
        for b in (1, 2, 3):
            tl.broker(b, alive=b in isr)
            if b in isr:
                tl.replica(b, leo=leo)
        tl.advance(2)
        tl.meta(
            leader=leader, epoch=epoch, replicas=[1, 2, 3], isr=isr, hw=leo, elr=elr,
            epoch_start=start,
        )  # fmt: skip
        tl.advance(5 * SECOND - 2)

    for isr, elr in (([1, 2, 3], []), ([1, 2, 3], []), ([1, 2], []), ([1], shrunk), ([1], None)):
        round(isr, elr)
        leo += 1_000 if len(isr) >= 2 else 0  # below min ISR: acks=all writes fail
    round([2], elected, leader=2, epoch=5, start=leo if start_known else None)
    round([2], elected, leader=2, epoch=5)
    return tl


def elr_election_after_unreported_round() -> Timeline:
    """Kafka 4.1+ (ELR on): the ELR [2] reported when the ISR shrank, then one read without
    it (:func:`_elr_election`): the ELR last reported stands."""
    return _elr_election("elr", shrunk=[2], elected=[1], start_known=False)


def elr_election_shrink_unreported() -> Timeline:
    """The very read that shrank the ISR to [1] carried no ELR: the monitor never saw 2 in
    the ELR. 2's election is outside the last ISR and ELR seen -- on a topic that forbids
    unclean elections, so the controller took it from an ELR the reads did not show. Its
    log decides: the epoch begins at the committed HW, nothing lost."""
    return _elr_election("elr-unseen", shrunk=None, elected=None, start_known=True)


def rolling_restart_rf2_between_reads() -> Timeline:
    """A rolling restart of an RF 2 topic (min ISR 1, unclean elections off): broker 2
    restarts (ISR [1]); between the next two reads it comes back, rejoins the ISR, and
    broker 1 is restarted -- its controlled shutdown hands leadership to 2. The reads see
    ISR [1] and then leader 2 with ISR [2]: outside the last ISR, none of it in the new
    one, as an unclean election looks. The topic forbids those: 2's log decides, and its
    epoch begins at the committed HW."""
    tl = Timeline(topic="rf2")
    tl.config(rf=2, min_isr=1)
    leo = 100_000

    def round(isr: list[int], leader: int, epoch: int, start: int | None = None) -> None:
        for b in (1, 2):
            tl.broker(b, alive=b in isr)
            if b in isr:
                tl.replica(b, leo=leo)
        tl.advance(2)
        tl.meta(leader=leader, epoch=epoch, replicas=[1, 2], isr=isr, hw=leo, epoch_start=start)
        tl.advance(30 * SECOND - 2)

    for isr, leader, epoch in (([1, 2], 1, 4), ([1, 2], 1, 4), ([1], 1, 4)):
        round(isr, leader, epoch)
        leo += 1_000
    round([2], 2, 5, start=leo)  # 2 back and elected, 1 restarting: between two reads
    leo += 1_000
    round([2], 2, 5)
    leo += 1_000
    round([1, 2], 2, 5)
    return tl


def clean_failover_slow_scrape() -> Timeline:
    """A clean failover during a slow scrape. A round's samples carry the round's start,
    but a page can be read seconds later: broker 1 stops right after the round's metadata
    read (leader 1), 2 is elected and appends 10 offsets, and only then is 2's page read --
    its sample, stamped before that metadata, says 10 more than epoch 5 begins with. The
    election's round has no page in time, and the epoch record comes a round late, when
    epoch 5's own HW has passed that sample. The sample is not a truncation below what was
    committed: the HW before the election is."""
    tl = Timeline(topic="slowscrape")
    tl.config(rf=3, min_isr=2)
    leo = _rounds(tl, 3, 100_000, leader=1, epoch=4, isr=[1, 2, 3])
    leo += 1_000
    for b in (1, 2, 3):
        tl.broker(b)
        tl.replica(b, leo=leo + 10 if b == 2 else leo)  # 2's page read after the election
    tl.advance(2)
    tl.meta(leader=1, epoch=4, replicas=[1, 2, 3], isr=[1, 2, 3], hw=leo)
    tl.advance(5 * SECOND - 2)
    start = leo
    for epoch_start in (None, start):
        leo += 500
        tl.broker(1, alive=False)
        for b in (2, 3):
            tl.broker(b)
            if epoch_start is not None:  # the election's round: no page in time
                tl.replica(b, leo=leo)
        tl.advance(2)
        tl.meta(leader=2, epoch=5, replicas=[1, 2, 3], isr=[2, 3], hw=leo, epoch_start=epoch_start)
        tl.advance(5 * SECOND - 2)
    return tl


def failback_after_blind_failover() -> Timeline:
    """A rolling restart's two steps: leader 1 stops and 2 takes over while the collector is
    blind to 2 for a round (its epoch record a round late); 1 comes back, catches up, rejoins
    the ISR and gets its leadership back by a preferred election -- rejoin and election
    between two metadata reads. The guess of epoch 6's start from 2's stale sample must not
    mark 1's committed records as another epoch's suffix once the record says otherwise."""
    tl = Timeline(topic="failback")
    tl.config(rf=3, min_isr=2)
    leo = _rounds(tl, 4, 100_000, leader=1, epoch=5, isr=[1, 2, 3], hw_ahead=40)
    leo += 5_000  # 1 wrote a last round, all replicated, then stopped
    tl.broker(1, alive=False)
    tl.broker(2, alive=False)  # its scrape timed out
    tl.broker(3)
    tl.replica(3, leo=leo)
    tl.advance(2)
    tl.meta(leader=2, epoch=6, replicas=[1, 2, 3], isr=[2, 3], hw=leo)  # no epoch record
    tl.advance(5 * SECOND - 2)
    start, leo = leo, leo + 5_000
    tl.broker(1, alive=False)
    for b in (2, 3):
        tl.broker(b)
        tl.replica(b, leo=leo if b == 2 else leo - 5)
    tl.advance(2)
    tl.meta(leader=2, epoch=6, replicas=[1, 2, 3], isr=[2, 3], hw=leo, epoch_start=start)
    tl.advance(5 * SECOND - 2)
    leo = _rounds(tl, 3, leo, leader=2, epoch=6, isr=[2, 3], hw_ahead=40)
    leo += 5_000
    for b in (1, 2, 3):
        tl.broker(b)
        tl.replica(b, leo=leo if b == 1 else leo - 5)
    tl.advance(2)
    tl.meta(leader=1, epoch=7, replicas=[1, 2, 3], isr=[1, 2, 3], hw=leo, epoch_start=leo)
    tl.advance(5 * SECOND - 2)
    _rounds(tl, 3, leo, leader=1, epoch=7, isr=[1, 2, 3], hw_ahead=40)
    return tl


def _failback_old_leader_ahead(topic: str, unclean: bool) -> Timeline:
    """A rolling restart's failover and failback: leader 1's last page, read just before
    its controlled shutdown, holds 3 offsets its followers do not (in flight, never
    committed); 2 takes over at epoch 6 below them -- so 1 must truncate them. 1 comes back
    while 2 leads, truncates, catches up, rejoins the ISR and gets its leadership back by a
    preferred election, rejoin and election between two reads: the last ISR seen ([2, 3])
    does not hold it; the new one holds it with both."""
    tl = Timeline(topic=topic)
    tl.config(rf=3, min_isr=2, unclean=unclean)
    leo = _rounds(tl, 4, 100_000, leader=1, epoch=5, isr=[1, 2, 3])
    leo += 5_000
    for b in (1, 2, 3):  # the last round before the handover: 1 a fetch ahead
        tl.broker(b)
        tl.replica(b, leo=leo if b == 1 else leo - 5)
    tl.advance(2)
    tl.meta(leader=1, epoch=5, replicas=[1, 2, 3], isr=[1, 2, 3], hw=leo - 5)
    tl.advance(5 * SECOND - 2)
    start, leo = leo - 3, leo + 5_000
    tl.broker(1, alive=False)
    for b in (2, 3):
        tl.broker(b)
        tl.replica(b, leo=leo if b == 2 else leo - 5)
    tl.advance(2)
    tl.meta(leader=2, epoch=6, replicas=[1, 2, 3], isr=[2, 3], hw=leo - 5, epoch_start=start)
    tl.advance(5 * SECOND - 2)
    leo = _rounds(tl, 3, leo, leader=2, epoch=6, isr=[2, 3], jmx=(2, 3))
    leo += 5_000
    for b in (1, 2, 3):
        tl.broker(b)
        tl.replica(b, leo=leo if b == 1 else leo - 5)
    tl.advance(2)
    tl.meta(leader=1, epoch=7, replicas=[1, 2, 3], isr=[1, 2, 3], hw=leo - 5, epoch_start=leo)
    tl.advance(5 * SECOND - 2)
    _rounds(tl, 3, leo, leader=1, epoch=7, isr=[1, 2, 3])
    return tl


def failback_old_leader_ahead() -> Timeline:
    return _failback_old_leader_ahead("fbahead", unclean=False)


def failback_old_leader_ahead_unclean_allowed() -> Timeline:
    return _failback_old_leader_ahead("fbahead_unclean", unclean=True)


def controller_restart_without_process_start() -> Timeline:
    """A controller whose exporter has no process metrics (no ``started_at``) restarts
    between two scrapes and replays two old unclean elections: its counter 0 -> 2 with no
    gap seen. Without the process start a restart cannot be told from new elections, so
    the counter is not believed at all."""
    tl = Timeline(topic="quiet")
    for i in range(20):
        tl.broker(1, unclean_elections_total=0 if i < 12 else 2, active_controller=True)
        tl.meta(leader=1, epoch=0, replicas=[1], isr=[1], hw=100)
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
            "truncation_below_hw:event seed1/0 broker 1",
            "leader_election:event seed1/0 broker 1",
            "committed_data_loss:event seed1/0",
            "isr_shrink:event seed1/0 broker 2",
            "isr_expand:event seed1/0 broker 2",
            "stale_telemetry:open broker 2",
            "stale_telemetry:resolved broker 2",
        ],
        forbid=["unclean_election", "hw_regression", "log_divergence", "stale_telemetry broker 1"],
        details=[
            ("truncation_below_hw", "committed_offsets_removed", 1),
            ("truncation_below_hw", "leo_before", 2),
            ("committed_data_loss", "lost_count", 1),
            ("committed_data_loss", "lost_from", 1),
            ("committed_data_loss", "lost_to", 2),
            ("committed_data_loss", "clean_election", True),
            ("leader_election", "clean", True),
            ("isr_shrink", "removed", [2]),
            ("isr_expand", "added", [2]),
        ],
    ),
    Scenario(
        "seed2_divergence",
        "Pre-epoch protocol: B's election loses committed offset 1, A rejoins without "
        "truncating, so the logs diverge from offset 1.",
        seed2_divergence,
        config={"epoch_truncation": False},
        expect=[
            "offline:open seed2/0",
            "offline:resolved seed2/0",
            "truncation_below_hw:event seed2/0 broker 2",  # B lost unflushed offset 1
            "committed_data_loss:event seed2/0",
            "log_divergence:open seed2/0 broker 1",
        ],
        forbid=["unclean_election", "hw_regression", "log_divergence seed2/0 broker 2"],
        details=[
            ("committed_data_loss", "lost_count", 1),
            ("committed_data_loss", "lost_from", 1),
            ("committed_data_loss", "new_leader", 2),
            ("log_divergence", "diverges_from", 1),
            ("log_divergence", "leo", 2),
        ],
    ),
    Scenario(
        "seed2_with_leader_epochs",
        "The same sequence under the leader-epoch protocol: the committed loss is still "
        "reported, but A is known to truncate to the epoch start, so no divergence.",
        seed2_divergence,
        expect=["committed_data_loss:event seed2/0", "truncation_below_hw:event seed2/0 broker 2"],
        forbid=["log_divergence", "unclean_election"],
        details=[("committed_data_loss", "lost_count", 1), ("committed_data_loss", "lost_from", 1)],
    ),
    Scenario(
        "unclean_election",
        "Leader 2 was outside the last ISR [1]; it held up to 1000 of a committed 5000.",
        unclean_election,
        expect=[
            "follower_lag:open unclean/0 broker 2",
            "isr_shrink:event unclean/0 broker 2",
            "offline:open unclean/0",
            "offline:resolved unclean/0",
            "leader_election:event unclean/0 broker 2",
            "unclean_election:event unclean/0 broker 2",
            "committed_data_loss:event unclean/0",
            "durability_risk:open topic unclean",
            "stale_telemetry:open broker 1",
        ],
        forbid=["hw_regression", "truncation_below_hw", "follower_lag unclean/0 broker 1"],
        details=[
            ("committed_data_loss", "lost_from", 1000),
            ("committed_data_loss", "lost_to", 5000),
            ("committed_data_loss", "lost_count", 4000),
            ("committed_data_loss", "clean_election", False),
            ("committed_data_loss", "new_leader", 2),
            ("unclean_election", "isr_before", [1]),
            ("isr_shrink unclean/0 broker 2", "removed", [2]),
            ("isr_shrink unclean/0 broker 2", "cause", "lagging"),
            ("durability_risk", "reasons", ["unclean_election_enabled"]),
        ],
    ),
    Scenario(
        "old_leader_returns",
        "The old leader returns ahead of the new one and truncates to the epoch start within "
        "seconds: the loss is reported once, and neither divergence nor a second truncation.",
        old_leader_returns,
        expect=[
            "committed_data_loss:event unclean/0",
            "isr_expand:event unclean/0 broker 1",
            "stale_telemetry:resolved broker 1",
        ],
        forbid=["log_divergence", "truncation_below_hw", "hw_regression"],
        details=[("committed_data_loss", "lost_count", 4000)],
    ),
    Scenario(
        "under_min_isr_and_recovery",
        "ISR 3 -> 2 (at min) -> 1 (under min: acks=all fails) -> 2 -> 3.",
        under_min_isr_and_recovery,
        expect=[
            "under_replicated:open minisr/0",
            "at_min_isr:open minisr/0",
            "under_min_isr:open minisr/0",
            "under_min_isr:resolved minisr/0",
            "at_min_isr:resolved minisr/0",
            "under_replicated:resolved minisr/0",
        ],
        forbid=["offline", "leader_election"],
        details=[
            ("under_min_isr:open", "isr_size", 1),
            ("under_min_isr:open", "min_isr", 2),
            ("under_min_isr:open", "isr", [1]),
            ("at_min_isr:open", "isr", [1, 2]),
            ("under_replicated:open", "missing", [3]),
        ],
    ),
    Scenario(
        "follower_stuck_in_isr",
        "Broker 3 stops fetching but stays listed in the ISR for >30 s: follower lag while in "
        "ISR and a stalled HW; the shrink releases the HW.",
        follower_stuck_in_isr,
        expect=[
            "follower_lag:open stuck/0 broker 3",
            "hw_lag:open stuck/0",
            "hw_lag:resolved stuck/0",
            "isr_shrink:event stuck/0 broker 3",
        ],
        forbid=["follower_lag stuck/0 broker 2", "under_min_isr", "committed_data_loss"],
        details=[
            ("follower_lag", "in_isr", True),
            ("follower_lag", "leo", 2000),
            ("follower_lag", "lag_ms", 35_000),
            ("hw_lag:open", "hw", 2000),
            ("isr_shrink", "removed", [3]),
        ],
    ),
    Scenario(
        "broker_goes_silent",
        "Broker 3 stops answering, then partition 1's metadata stops: both go stale; "
        "partition 0 and brokers 1 and 2 keep reporting and stay quiet.",
        broker_goes_silent,
        expect=["stale_telemetry:open broker 3", "stale_telemetry:open silent/1"],
        forbid=[
            "stale_telemetry broker 1",
            "stale_telemetry broker 2",
            "stale_telemetry silent/0",
            "stale_telemetry:resolved",
        ],
        details=[
            ("stale_telemetry broker 3", "silent_for_ms", 65_000),
            ("stale_telemetry silent/1", "silent_for_ms", 65_000),
        ],
    ),
    Scenario(
        "leader_flapping",
        "Four elections in two minutes open leader_flapping; ten quiet minutes resolve it.",
        leader_flapping,
        expect=[
            "leader_flapping:open flap/0",
            "leader_flapping:resolved flap/0",
            "leader_election:event flap/0 broker 2",
            "leader_election:event flap/0 broker 1",
        ],
        forbid=["unclean_election", "committed_data_loss"],
        details=[("leader_flapping:open", "elections", 3)],
        routine=True,
    ),
    Scenario(
        "durability_misconfigurations",
        "RF 1, min ISR 1 with RF 3, min ISR = RF and unclean elections each open "
        "durability_risk on their own topic; the CP topic stays quiet; fixing min ISR "
        "resolves its finding.",
        durability_misconfigurations,
        expect=[
            "durability_risk:open topic rf1",
            "durability_risk:open topic minisr1",
            "durability_risk:open topic minisr-eq-rf",
            "durability_risk:open topic unclean-on",
            "durability_risk:resolved topic minisr1",
        ],
        forbid=[
            "durability_risk topic cp-ok",
            "durability_risk:resolved topic rf1",
            "durability_risk:resolved topic minisr-eq-rf",
            "durability_risk:resolved topic unclean-on",
        ],
        details=[
            ("durability_risk topic rf1", "reasons", ["rf_1"]),
            ("durability_risk topic minisr1", "reasons", ["min_isr_1_with_rf_3"]),
            ("durability_risk topic minisr-eq-rf", "reasons", ["min_isr_not_below_rf"]),
            ("durability_risk topic unclean-on", "reasons", ["unclean_election_enabled"]),
            ("durability_risk topic unclean-on", "profile", "misconfigured"),
        ],
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
        routine=True,
    ),
    Scenario(
        "same_round_skew",
        "Within one collection round a follower read after its leader holds more: not a "
        "divergence (samples of one round have no order).",
        same_round_skew,
        forbid=["log_divergence", "follower_lag", "hw_regression", "truncation_below_hw"],
        routine=True,
    ),
    Scenario(
        "diverged_follower",
        "A follower ahead of its leader across rounds: its log differs.",
        diverged_follower,
        expect=["log_divergence:open diverged/0 broker 2"],
        forbid=["committed_data_loss", "truncation_below_hw", "log_divergence diverged/0 broker 1"],
        details=[("log_divergence", "leo", 9000), ("log_divergence", "leader", 1)],
    ),
    Scenario(
        "hw_regression",
        "A single low HW sample is a glitch; two in a row are a regression of 220. Read from "
        "the Admin API only (no leader log end to witness a rise), a new highest HW is "
        "believed at once when within four of the HW's own largest rises (1020 after 1010), "
        "else once a second read reaches it (1010, the first rise after the glitch). (A "
        "glitch on the high side is held the same way: impossible_samples_held.)",
        hw_regression,
        expect=["hw_regression:event hwreg/0"],
        forbid=["telemetry_inconsistent"],
        details=[
            ("hw_regression", "hw_before", 1020),
            ("hw_regression", "hw", 805),
            ("hw_regression", "lowest_hw", 800),
            ("hw_regression", "regressed_by", 220),
        ],
    ),
    Scenario(
        "clean_election_blind_round",
        "A clean failover in a half-blind round: the new leader's last sample is older than the "
        "HW, no epoch record -- the election waits for evidence (pending, never paged) and the "
        "next round's sample (it holds the committed HW) settles it: nothing lost.",
        clean_election_blind_round,
        expect=[
            "leader_election:event blind/0 broker 2",
            "election_pending:open blind/0",
            "election_pending:resolved blind/0",
            "isr_shrink:event blind/0 broker 1",
        ],
        forbid=[
            "committed_data_loss",
            "unclean_election",
            "truncation_below_hw",
            "hw_regression",
            "election_unverified",
            "follower_lag",
        ],
        details=[
            ("leader_election", "clean", True),
            ("isr_shrink", "cause", "not_answering"),
        ],
        routine=True,
    ),
    Scenario(
        "unclean_election_admin_only",
        "Without JMX (Admin API only), the election is still judged: 2 was outside the last "
        "ISR [1], and its own epoch record (OffsetsForLeaderEpoch) says its epoch began at "
        "1000 of a committed 2500 -- the exact loss, with no replica sample at all. (2500, "
        "read once just before 1 died, is believed: within four of the HW's own rises, "
        "500 a read; one far beyond them would be held, and named as unconfirmed_hw.)",
        unclean_election_admin_only,
        expect=[
            "isr_shrink:event unclean/0 broker 2",
            "offline:open unclean/0",
            "offline:resolved unclean/0",
            "leader_election:event unclean/0 broker 2",
            "unclean_election:event unclean/0 broker 2",
            "committed_data_loss:event unclean/0",
            "durability_risk:open topic unclean",
            "stale_telemetry:open broker 1",
        ],
        forbid=["hw_regression", "election_unverified", "election_pending", "follower_lag"],
        details=[
            ("committed_data_loss", "lost_from", 1000),
            ("committed_data_loss", "lost_to", 2500),
            ("committed_data_loss", "lost_count", 1500),
            ("committed_data_loss", "leo_sampled", "epoch"),
            ("unclean_election", "isr_before", [1]),
            ("isr_shrink unclean/0 broker 2", "cause", "unknown"),
        ],
    ),
    Scenario(
        "clean_failover_admin_only",
        "A rolling restart seen without JMX: the failover's only evidence is the new leader's "
        "epoch record, read a round late -- pending until then (never paged), then nothing "
        "lost; the restarts are broker silence and ISR changes, nothing critical.",
        clean_failover_admin_only,
        expect=[
            "leader_election:event adminroll/0 broker 2",
            "election_pending:open adminroll/0",
            "election_pending:resolved adminroll/0",
            "isr_shrink:event adminroll/0 broker 1",
            "isr_expand:event adminroll/0 broker 1",
            "isr_shrink:event adminroll/0 broker 3",
            "stale_telemetry:open broker 1",
            "stale_telemetry:resolved broker 1",
        ],
        forbid=[
            "committed_data_loss",
            "unclean_election",
            "hw_regression",
            "election_unverified",
            "truncation_below_hw",
        ],
        details=[("leader_election", "clean", True)],
        routine=True,
    ),
    Scenario(
        "unclean_old_leader_rejoined",
        "Leader 2 was outside the last ISR [1], and 1 rejoined before the next sample: "
        "membership cannot tell this from a clean handover (a reassignment, a preferred "
        "election after a rejoin); the new leader's log can -- the epoch record shows the "
        "loss [1000, 5410), so the election was unclean (witness loss).",
        unclean_old_leader_rejoined,
        expect=[
            "unclean_election:event rejoined/0 broker 2",
            "committed_data_loss:event rejoined/0",
        ],
        forbid=["leader_election rejoined/0 broker 1", "hw_regression", "truncation_below_hw"],
        details=[
            ("unclean_election", "witness", "loss"),
            ("leader_election", "membership", "rejoined_with_last_isr"),
            ("committed_data_loss", "lost_from", 1_000),
            ("committed_data_loss", "lost_to", 5_410),
            ("committed_data_loss", "leo_sampled", "epoch"),
        ],
    ),
    Scenario(
        "broker_restart_no_flicker",
        "A follower back from a clean restart is judged on its own sample of the round, not on "
        "its last one from before: no follower_lag opens (and resolves in the same ms).",
        broker_restart_no_flicker,
        expect=["isr_shrink:event restart/0 broker 3", "isr_expand:event restart/0 broker 3"],
        forbid=["follower_lag", "log_divergence", "hw_lag", "truncation_below_hw"],
        routine=True,
    ),
    Scenario(
        "election_without_evidence",
        "No epoch record and no sample of the new leader for 60 s: pending (info), then "
        "election_unverified (warning, the loss unknown) -- no committed_data_loss is claimed.",
        election_without_evidence,
        expect=[
            "election_pending:open unknown/0",
            "election_pending:resolved unknown/0",
            "election_unverified:event unknown/0 broker 3",
        ],
        forbid=["committed_data_loss", "unclean_election", "hw_regression"],
        details=[("election_unverified", "epoch", 4)],
    ),
    Scenario(
        "stale_former_leader_elected",
        "A stale former leader elected uncleanly holds epoch 1's suffix above 3000, not epoch "
        "2's committed records: everything committed from 3000 on is lost (3000 offsets), "
        "though its log end (4000) is above where epoch 2 began.",
        stale_former_leader_elected,
        expect=["unclean_election:event stale/0 broker 3", "committed_data_loss:event stale/0"],
        details=[
            ("committed_data_loss", "lost_from", 3_000),
            ("committed_data_loss", "lost_to", 6_000),
            ("committed_data_loss", "lost_count", 3_000),
            ("committed_data_loss", "diverged_from", 3_000),
        ],
    ),
    Scenario(
        "controller_counts_unclean_election",
        "The controllers' unclean-election counter rose by one (a partition the monitor does "
        "not see): reported once per warm controller, without a partition; the restarted "
        "controller's replayed count is a new baseline, not an election.",
        controller_counts_unclean_election,
        expect=["unclean_election:event broker 1", "unclean_election:event broker 2"],
        forbid=["unclean_election broker 3", "committed_data_loss", "leader_election"],
        details=[
            ("unclean_election", "witness", "controller_counter"),
            ("unclean_election", "counted", 1),
        ],
    ),
    Scenario(
        "future_stamped_event",
        "One event stamped a year ahead must not make every later event of its partition "
        "late: it is rejected (a replay checks it against the other sources' stamps, the "
        "job against its Kafka record's), and the ISR shrinking below min.insync.replicas "
        "and the partition going offline are still reported (before: neither is, and the "
        "partition's telemetry looks current for a year).",
        future_stamped_event,
        expect=[
            "isr_shrink:event ahead/0 broker 3",
            "isr_shrink:event ahead/0 broker 2",
            "at_min_isr:open ahead/0",
            "under_min_isr:open ahead/0",
            "offline:open ahead/0",
        ],
        forbid=["stale_telemetry"],
        rejects={23: "ahead of the newest stamp of cluster lab"},
    ),
    Scenario(
        "impossible_partition_records",
        "A partition record Kafka could never give -- an ISR listing broker 1 twice, a "
        "leader that is not a replica, a replica listed twice -- is a collector's bug, not "
        "a state of the cluster: it is rejected with a reason naming the field and the "
        "broker, and the rounds around it are judged as usual. (Before: accepted; the ISR "
        "[1, 1] counted as two in-sync replicas, at_min_isr instead of under_min_isr -- a "
        "missed page.)",
        impossible_partition_records,
        expect=[
            "isr_shrink:event impossible/0 broker 3",
            "isr_shrink:event impossible/0 broker 2",
            "at_min_isr:open impossible/0",
            "under_min_isr:open impossible/0",
        ],
        forbid=["leader_election", "stale_telemetry"],
        rejects={
            9: "leader: broker 4 is not one of the replicas [1, 2, 3]",
            17: "replicas: broker 2 is listed twice ([1, 2, 2])",
            25: "isr: broker 1 is listed twice ([1, 1])",
        },
    ),
    Scenario(
        "impossible_samples_held",
        "One impossible sample never pages (issue 50). An HW of 10^12 while the leader holds "
        "16,000 is held until a witness confirms it -- the leader's next log end says it "
        "was never possible (before: critical hw_regression of 999,999,983,995 offsets); a "
        "leader log end of 10^12 seen once, then back in line, is taken out of the leader's "
        "history (before: the HW looked stuck behind it); an epoch of 2^31-1 seen once, "
        "then 3 again in two reads (one alone may be a broker's stale view: held until the "
        "second), is a spike of that read (before: epoch_regression, and the "
        "partition's history forgotten). Each is said as telemetry_inconsistent, naming the "
        "source and the value.",
        impossible_samples_held,
        expect=[
            "telemetry_inconsistent:event spiky/0",
            "telemetry_inconsistent:event spiky/1 broker 1",
            "telemetry_inconsistent:event spiky/2",
        ],
        forbid=[
            "hw_regression",
            "hw_lag",
            "epoch_regression",
            "truncation_below_hw",
            "log_divergence",
            "leader_election",
            "follower_lag",
            "committed_data_loss",
        ],
        details=[
            ("telemetry_inconsistent spiky/0", "value", 10**12),
            ("telemetry_inconsistent spiky/0", "field", "high_watermark"),
            ("telemetry_inconsistent spiky/1 broker 1", "field", "log_end_offset"),
            ("telemetry_inconsistent spiky/2", "value", 2**31 - 1),
        ],
        routine=True,
    ),
    Scenario(
        "broker_restarts_between_reads",
        "A broker restarted between two reads leaves the ISR: its new process start says "
        "why -- cause restarted (before: lagging, as if it had fallen behind).",
        broker_restarts_between_reads,
        expect=["isr_shrink:event bounce/0 broker 3", "isr_expand:event bounce/0 broker 3"],
        forbid=["follower_lag", "stale_telemetry"],
        details=[("isr_shrink bounce/0 broker 3", "cause", "restarted")],
        routine=True,
    ),
    Scenario(
        "topic_deleted",
        "A deleted topic is forgotten on the collector's word: its open conditions resolve, "
        "it never goes stale, a sample taken before the deletion is ignored, and the topic "
        "created again later starts a new history, said once as topic_recreated (before: the "
        "deletion event is refused, the partition goes stale and stays open for good).",
        topic_deleted,
        expect=[
            "under_replicated:open gone/0",
            "under_replicated:resolved gone/0",
            "at_min_isr:resolved gone/0",
            "topic_deleted:event topic gone",
            "topic_recreated:event gone/0",
        ],
        forbid=[
            "stale_telemetry",
            "truncation_below_hw",
            "hw_regression",
            "epoch_regression",
            "under_replicated kept/0",
            "topic_deleted:event topic kept",
        ],
        details=[
            ("topic_deleted", "reason", "deleted"),
            ("topic_recreated", "committed_hw_before", 1_300),
        ],
        routine=True,
    ),
    Scenario(
        "topic_absent_from_metadata",
        "Without the deletion signal, a topic the metadata reads stop listing while they go "
        "on listing the rest of the cluster is forgotten after forget_absent_ms (10 minutes): "
        "what stayed open resolves, its staleness too (before: stale_telemetry opens after a "
        "minute and never resolves).",
        topic_absent_from_metadata,
        expect=[
            "under_replicated:resolved absent/0",
            "stale_telemetry:open absent/0",
            "stale_telemetry:resolved absent/0",
            "topic_deleted:event topic absent",
        ],
        forbid=[
            "stale_telemetry kept/0",
            "under_replicated kept/0",
            "topic_deleted:event topic kept",
        ],
        details=[("topic_deleted", "reason", "absent")],
        routine=True,
    ),
    Scenario(
        "collector_gap",
        "A gap in the collector's rounds is not an HW stall: the HW is known only as of its "
        "last observation, so lag is measured up to then (before: hw_lag opens on the "
        "leader's first sample after the gap and resolves 2 ms later with the HW).",
        collector_gap,
        forbid=["hw_lag", "follower_lag", "stale_telemetry"],
        expect=[],
        routine=True,
    ),
    Scenario(
        "topic_recreated",
        "A topic deleted and recreated under the same name (a new topic id) starts a new "
        "history: one info finding, nothing judged across the two incarnations (before: an "
        "epoch regression, and truncation below the HW when it comes within a round).",
        topic_recreated,
        expect=["topic_recreated:event recreated/0"],
        forbid=[
            "truncation_below_hw",
            "hw_regression",
            "committed_data_loss",
            "follower_lag",
            "hw_lag",
            "epoch_regression",
            "leader_election",
        ],
        details=[
            ("topic_recreated", "topic_id_before", "kDqT6kqVQnC4mA8-cUxTwQ"),
            ("topic_recreated", "topic_id", "Yx2Zt3PqRkWm0aBcDeFgHw"),
            ("topic_recreated", "committed_hw_before", 5_500),
        ],
        routine=True,
    ),
    Scenario(
        "topic_recreated_metadata_late",
        "Replica samples have no topic id: two low samples of a recreated topic's replicas, "
        "with no metadata between them, are not a truncation; the metadata then says the "
        "topic was recreated.",
        topic_recreated_metadata_late,
        expect=["topic_recreated:event late/0"],
        forbid=[
            "truncation_below_hw",
            "hw_regression",
            "committed_data_loss",
            "follower_lag",
            "hw_lag",
            "epoch_regression",
        ],
        routine=True,
    ),
    Scenario(
        "throttled_reassignment",
        "A throttled reassignment (KIP-455) is routine: under-replication is counted against "
        "the original replicas as Kafka does, the adding replica's copy is progress, not lag, "
        "and the replica moved away leaves the state without an ISR shrink.",
        throttled_reassignment,
        expect=[
            "reassignment:open moved/0",
            "reassignment:resolved moved/0",
            "isr_expand:event moved/0 broker 4",
        ],
        forbid=[
            "under_replicated",
            "follower_lag",
            "isr_shrink",
            "at_min_isr",
            "hw_lag",
            "truncation_below_hw",
        ],
        details=[("reassignment:open", "adding", [4]), ("reassignment:open", "removing", [3])],
        routine=True,
    ),
    Scenario(
        "reassignment_unsaid_in_its_first_read",
        "A reassignment whose first round's read of the reassignments did not show it: the "
        "replica set only grew, so its new replica outside the ISR is taken as adding -- "
        "no under_replicated (before: opened for that round, as a CI run of the churn lab "
        "test saw).",
        reassignment_unsaid_in_its_first_read,
        expect=["reassignment:open unsaid/0", "reassignment:resolved unsaid/0"],
        forbid=["under_replicated", "follower_lag", "isr_shrink", "at_min_isr"],
        routine=True,
    ),
    Scenario(
        "reassignment_moves_the_leader",
        "A reassignment that removes the leader hands leadership to the new replica in the "
        "same change that adds it to the ISR: outside the last ISR, yet clean (its log holds "
        "the committed HW) -- no unclean_election, no loss (found on the real lab).",
        reassignment_moves_the_leader,
        expect=[
            "leader_election:event handover/0 broker 3",
            "reassignment:open handover/0",
            "reassignment:resolved handover/0",
        ],
        forbid=[
            "unclean_election",
            "committed_data_loss",
            "under_replicated",
            "follower_lag",
            "isr_shrink",
            "truncation_below_hw",
        ],
        details=[("leader_election", "membership", "reassigned_to")],
        routine=True,
    ),
    Scenario(
        "reassignment_replaces_every_replica",
        "A move that keeps none of the old replicas (RF 1 [2] -> [3]; RF 2 [1, 2] -> [3, 4]) "
        "hands leadership to a new replica in the change that adds it to the ISR: the new ISR "
        "holds none of the last one, yet the reassignment was adding that leader -- clean, "
        "judged by its log (no loss).",
        reassignment_replaces_every_replica,
        expect=[
            "leader_election:event replaced/0 broker 3",
            "leader_election:event replaced/1 broker 3",
            "reassignment:open replaced/0",
            "reassignment:resolved replaced/1",
        ],
        forbid=["under_replicated", "follower_lag", "isr_shrink"],
        details=[("leader_election", "membership", "reassigned_to")],
        routine=True,
    ),
    Scenario(
        "failback_after_blind_failover",
        "A rolling restart's failover (new leader unseen for a round) and failback (rejoin and "
        "preferred election between two reads): the exact epoch record replaces the guess from "
        "a stale sample, so the returning leader's committed records are no 'other epoch's "
        "suffix' -- no loss, nothing unclean.",
        failback_after_blind_failover,
        expect=[
            "leader_election:event failback/0 broker 2",
            "leader_election:event failback/0 broker 1",
        ],
        forbid=["committed_data_loss", "unclean_election", "truncation_below_hw"],
        routine=True,
    ),
    Scenario(
        "reassignment_between_reads",
        "A move that begins and ends between two reads (RF 1 [2] -> [3]; RF 3 [1, 2, 3] -> "
        "[4, 5, 6]) shows only its end: a new leader outside the last ISR, none of which is "
        "in the new one. That leader was not a replica when last seen, and no election of "
        "Kafka's picks a broker outside the replica set: a reassignment's handover, judged by "
        "its log (no loss) -- not an unclean election.",
        reassignment_between_reads,
        expect=[
            "leader_election:event moved/0 broker 3",
            "leader_election:event moved/1 broker 4",
        ],
        forbid=["unclean_election", "committed_data_loss", "isr_shrink"],
        details=[("leader_election", "membership", "reassigned_to")],
        routine=True,
    ),
    Scenario(
        "follower_disk_replaced",
        "A follower comes back from a disk replacement with an empty log and copies the "
        "partition again: its log end falls far below the committed HW, which the leader "
        "and the other follower still hold. A follower's truncation is a warning (a "
        "ticket), not a page: no committed data is gone, and were it elected holding less, "
        "committed_data_loss would page.",
        follower_disk_replaced,
        expect=[
            "truncation_below_hw:event disk/0 broker 3",
            "isr_shrink:event disk/0 broker 3",
            "isr_expand:event disk/0 broker 3",
        ],
        forbid=["committed_data_loss", "leader_election", "hw_regression"],
        details=[("truncation_below_hw", "leader", 1)],
        routine=True,
    ),
    Scenario(
        "elr_election_after_unreported_round",
        "An election from the eligible leader replicas (KIP-966) after a read that carried "
        "no ELR (a fallback to the Metadata API): not reported is not empty -- the ELR last "
        "reported ([2]) stands, and 2's election is clean, not a page.",
        elr_election_after_unreported_round,
        expect=["leader_election:event elr/0 broker 2", "under_min_isr:open elr/0"],
        forbid=["unclean_election", "committed_data_loss"],
        details=[
            ("leader_election", "clean", True),
            # Named as such (before: in_last_isr, though 2 was not in the last ISR).
            ("leader_election", "membership", "eligible_leader_replica"),
        ],
    ),
    Scenario(
        "clean_failover_slow_scrape",
        "A clean failover while a page was being read: the new leader's last sample before "
        "the election was read after it (a round's samples carry its start) and holds 10 "
        "more than the epoch begins with; the epoch record comes when the epoch's own HW has "
        "passed it. Judged against the HW committed before the election, nothing was "
        "truncated: no page (the model paged a truncation_below_hw of 10 offsets).",
        clean_failover_slow_scrape,
        expect=["leader_election:event slowscrape/0 broker 2"],
        forbid=["truncation_below_hw", "committed_data_loss", "unclean_election"],
        details=[("leader_election", "membership", "in_last_isr")],
        routine=True,
    ),
    Scenario(
        "elr_election_shrink_unreported",
        "An election from the ELR that the reads never showed: the read that shrank the ISR "
        "below min ISR carried no ELR. Outside the last ISR seen, on a topic that forbids "
        "unclean elections: the controller elected from an ISR or ELR the reads missed. The "
        "log decides -- the epoch begins at the committed HW: no unclean election, no page.",
        elr_election_shrink_unreported,
        expect=["leader_election:event elr-unseen/0 broker 2", "under_min_isr:open elr-unseen/0"],
        forbid=["unclean_election", "committed_data_loss", "election_unverified"],
        details=[("leader_election", "membership", "outside_last_isr_unclean_disabled")],
    ),
    Scenario(
        "rolling_restart_rf2_between_reads",
        "An RF 2 topic's rolling restart: the follower back in the ISR and the leader's "
        "controlled shutdown both between two reads. Leader 2 with ISR [2] after ISR [1] "
        "looks like an unclean election; the topic forbids them, the log shows nothing "
        "lost: a routine failover, no page.",
        rolling_restart_rf2_between_reads,
        expect=["leader_election:event rf2/0 broker 2"],
        forbid=["unclean_election", "committed_data_loss", "election_unverified"],
        details=[("leader_election", "membership", "outside_last_isr_unclean_disabled")],
        routine=True,
    ),
    Scenario(
        "failback_old_leader_ahead",
        "A rolling restart: the old leader's last page held 3 in-flight offsets its "
        "successor's epoch starts below (it must truncate them); it comes back, rejoins and "
        "is elected back between two reads. Rejoining, it truncated (KIP-101): its old "
        "suffix proves no loss, and the loss it would give cannot make the election unclean "
        "in turn. The topic lets no unclean election happen: nothing but the elections.",
        failback_old_leader_ahead,
        expect=[
            "leader_election:event fbahead/0 broker 2",
            "leader_election:event fbahead/0 broker 1",
        ],
        forbid=["committed_data_loss", "unclean_election", "election_unverified"],
        routine=True,
    ),
    Scenario(
        "failback_old_leader_ahead_unclean_allowed",
        "The same failback on a topic with unclean.leader.election.enable: had the "
        "controller elected the old leader from outside the ISR, its suffix would be lost "
        "committed data. Nothing says which: a warning that the loss is not verified (at "
        "most the committed offsets above the suffix), never a page.",
        failback_old_leader_ahead_unclean_allowed,
        expect=[
            "leader_election:event fbahead_unclean/0 broker 2",
            "leader_election:event fbahead_unclean/0 broker 1",
            "election_unverified:event fbahead_unclean/0 broker 1",
        ],
        forbid=["committed_data_loss", "unclean_election"],
        routine=True,
    ),
    Scenario(
        "controller_restart_without_process_start",
        "A controller restarted between two scrapes replays old unclean elections (counter "
        "0 -> 2); without its process start (an exporter without process metrics) that cannot "
        "be told from new elections: the counter is not believed.",
        controller_restart_without_process_start,
        expect=[],
        forbid=["unclean_election"],
        routine=True,
    ),
    Scenario(
        "epoch_regression",
        "Leader epoch 12 -> 0 a minute later: the topic was recreated; no loss is claimed.",
        epoch_regression,
        expect=["epoch_regression:event recreated/0"],
        forbid=["hw_regression", "committed_data_loss", "leader_election", "truncation_below_hw"],
        details=[("epoch_regression", "epoch_before", 12), ("epoch_regression", "epoch", 0)],
    ),
]


def write_all() -> None:
    DATA.mkdir(exist_ok=True)
    for sc in SCENARIOS:
        sc.path.write_text(sc.build().jsonl())


if __name__ == "__main__":
    write_all()
    print(f"wrote {len(SCENARIOS)} scenarios to {DATA}")
