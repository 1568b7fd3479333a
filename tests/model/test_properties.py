"""Property-based tests of the model: what it *reports*, checked against what it was shown
(random contract-valid streams) and against what happened (streams sampled from a simulated
partition, :mod:`monitor.dev.kafka_sim`, whose ground truth is known).

Each property is a claim the model makes to on-call: a reported loss is a range of offsets
that were committed; a reported HW is one Kafka had; the HW does not go back unless the
model says so; the same stream gives the same findings, whatever process replays it.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from monitor.contract.events import to_model, validate_event
from monitor.dev.kafka_sim import Sim
from monitor.dev.testing import T0, Timeline
from monitor.model import ClusterModel, Finding, FindingKind, FindingState, ModelConfig
from monitor.model.events import PartitionMeta, ReplicaReport
from tests.model.strategies import BROKERS, COMMON, SIMULATED, broker_id, simulated, streams

K = FindingKind
ROOT = Path(__file__).resolve().parents[2]


def _run(model: ClusterModel, events: list[dict[str, Any]]) -> list[Finding]:
    out: list[Finding] = []
    for ev in events:
        out.extend(model.apply(to_model(validate_event(ev))))
    return out


def _check_invariants(model: ClusterModel) -> None:
    """Bounds the model promises whatever it was fed (its memory per partition)."""
    for s in model.partitions.values():
        assert len(s.lineage) <= model.config.lineage_limit
        assert s.leader_samples() <= model.config.leo_history
        for rs in s.replica_states.values():
            # Kafka resets a follower's lag clock at every election: lag cannot predate
            # the current leadership.
            assert rs.lag_ms <= max(0, s.last_seen - s.epoch_started_at), (rs, s.epoch_started_at)


class Shown:
    """What a stream has shown the model so far, per partition: the evidence a report may
    rest on."""

    def __init__(self) -> None:
        self.hws: set[int] = set()
        self.max_hw = -1

    def see(self, ev: Any) -> None:
        hw = ev.high_watermark if isinstance(ev, PartitionMeta | ReplicaReport) else None
        if hw is not None:
            self.hws.add(hw)
            self.max_hw = max(self.max_hw, hw)


def _check_reports(model: ClusterModel, events: list[dict[str, Any]]) -> list[Finding]:
    """Apply ``events`` one by one and check every report against what was shown.

    - a loss is a range ``[lost_from, lost_to)`` with ``lost_count`` its length, starting
      at the new leader's log end and ending at or below the highest HW the stream showed;
      the committed HW it was judged against is one the stream showed (or an earlier
      loss's new log end, after which the log was rebased);
    - the HW the model reports (what ``explain`` and ``/metrics`` show) is one the stream
      showed, and never goes back within an epoch unless ``hw_regression`` says so.
    """
    shown: dict[tuple[str, str, int], Shown] = {}
    rebased: dict[tuple[str, str, int], set[int]] = {}
    out: list[Finding] = []
    recent: list[str] = []  # for failure messages: the last events and what they caused
    for raw in events:
        ev = to_model(validate_event(raw))
        key = (ev.cluster, getattr(ev, "topic", ""), getattr(ev, "partition", -1))
        before = model.partitions.get(key)
        # The HW read under the current leadership (a new leader's first HW may be lower:
        # the loss, if any, was judged at the election).
        hw_before = (
            (before.hw, before.leader_epoch)
            if before is not None and before.hw_at >= before.epoch_started_at
            else (-1, -1)
        )
        sh = shown.setdefault(key, Shown())
        sh.see(ev)
        found = model.apply(ev)
        out.extend(found)
        recent = [*recent[-12:], f"{raw} -> {[f'{f.kind}:{f.state}' for f in found]}"]
        history = "\n".join(recent)
        for f in found:
            if f.kind != K.COMMITTED_DATA_LOSS:
                continue
            d = f.details
            assert d["lost_count"] == d["lost_to"] - d["lost_from"] > 0, d
            # From the new leader's log end -- or below it, where its suffix is another
            # epoch's records (a stale former leader elected).
            assert d["lost_from"] == d.get("diverged_from", d["new_leader_leo"]), d
            assert d["lost_from"] <= d["new_leader_leo"], d
            assert d["lost_to"] <= sh.max_hw, (d, sh.max_hw)
            assert d["committed_hw_before"] in sh.hws | rebased.get(key, set()), d
            rebased.setdefault(key, set()).add(d["lost_from"])
        s = model.partitions.get(key)
        if s is None:
            continue
        if s.hw >= 0:
            assert s.hw in sh.hws, f"HW {s.hw} never shown ({sorted(sh.hws)}):\n{history}"
        hw0, epoch0 = hw_before
        if s.leader_epoch == epoch0 and 0 <= s.hw < hw0:
            assert any(f.kind == K.HW_REGRESSION for f in found), (
                f"HW {hw0} -> {s.hw} within epoch {epoch0} without hw_regression:\n{history}"
            )
    return out


def _check_well_formed(findings: list[Finding]) -> None:
    """Every resolved finding closes an open one with the same subject and opened_at."""
    opened: set[tuple[Any, ...]] = set()
    for f in findings:
        key = (f.kind, f.topic, f.partition, f.broker)
        if f.state == FindingState.OPEN:
            assert key not in {k[:4] for k in opened}, f"opened twice: {f}"
            opened.add((*key, f.opened_at))
        elif f.state == FindingState.RESOLVED:
            assert (*key, f.opened_at) in opened, f"resolved without open: {f}"
            opened.discard((*key, f.opened_at))


def _heal(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A healthy hour later: all brokers alive, ISR complete, replicas caught up."""
    last = max((e["observed_at"] for e in events), default=T0)
    epoch = max((e.get("leader_epoch", 0) for e in events), default=0) + 1
    tl = Timeline(topic="p", start=last + 3_600_000)
    tl.config(rf=3, min_isr=2)
    big = 10**12
    # Replicas are wiped and re-replicated, as an operator repairs a divergent log (under
    # the pre-epoch protocol nothing else makes a diverged replica truncate).
    for _ in range(2):
        for b in BROKERS:
            tl.replica(b, leo=0)
        tl.advance(1_000)
    # Long enough for every wait of the model to end (an election without evidence is
    # decided after election_evidence_wait_ms).
    rounds = ModelConfig().election_evidence_wait_ms // 5_000 + 2
    for i in range(rounds):
        for b in BROKERS:
            tl.broker(b)
        tl.replica(1, leo=big + i, hw=big + i)
        tl.replica(2, leo=big + i)
        tl.replica(3, leo=big + i)
        tl.meta(leader=1, epoch=epoch, replicas=BROKERS, isr=BROKERS, hw=big + i)
        tl.advance(5_000)
    return tl.events


#: The leader's own HW report (a ``replica`` event) read after the metadata's: the lower,
#: older metadata HW that follows at the same stamp is not news (found by this property).
LEADER_HW_THEN_OLDER_METADATA_HW = [
    {"schema_version": 1, "kind": "partition", "cluster": "lab", "observed_at": T0,
     "topic": "p", "partition": 0, "leader_epoch": 0, "replicas": [1, 2, 3], "isr": [1],
     "leader": 1},
    {"schema_version": 1, "kind": "replica", "cluster": "lab", "observed_at": T0 + 1,
     "topic": "p", "partition": 0, "broker": 1, "log_end_offset": 5, "high_watermark": 5},
    {"schema_version": 1, "kind": "partition", "cluster": "lab", "observed_at": T0 + 1,
     "topic": "p", "partition": 0, "leader_epoch": 0, "replicas": [1, 2, 3], "isr": [1],
     "leader": 1, "high_watermark": 4},
]  # fmt: skip


@COMMON
@given(streams(), st.booleans())
@example(LEADER_HW_THEN_OLDER_METADATA_HW, True)
def test_reports_rest_on_what_the_stream_showed(events: list[dict[str, Any]], epochs: bool) -> None:
    """Any valid stream: every loss is a committed range the stream showed, the reported HW
    is one the stream showed and goes back only with ``hw_regression``; conditions open and
    resolve in pairs; the model's memory stays bounded."""
    model = ClusterModel(ModelConfig(epoch_truncation=epochs))
    findings = _check_reports(model, events)
    _check_invariants(model)
    _check_well_formed(findings)
    findings += model.tick(events[-1]["observed_at"] + 120_000)
    _check_well_formed(findings)


@SIMULATED
@given(simulated())
def test_reports_agree_with_what_happened(sim: Sim) -> None:
    """Telemetry of a simulated partition under kills, restarts, elections (clean,
    preferred, unclean), missed scrapes and late epoch records:

    - the reports rest on what the stream showed (as above);
    - a reported HW never exceeds the LEO of a replica that was in the ISR when the HW was
      read, sampled in a later round of the same epoch (Kafka's HW is the minimum of the
      ISR's log ends, and within an epoch no ISR member truncates below it);
    """
    events = sim.events()
    model = ClusterModel()
    found = _check_reports(model, events)
    _check_well_formed(found)
    _check_invariants(model)
    # HW against later LEO samples of the ISR members it was read with. A round's JMX
    # samples (stamped T) precede its partition event (T + 2): the epoch a sample was
    # taken under is the one that event reports.
    epoch_of_round = {
        e["observed_at"] - 2: e["leader_epoch"] for e in events if e["kind"] == "partition"
    }
    hws = [
        (e["observed_at"], e["leader_epoch"], e["high_watermark"], set(e["isr"]))
        for e in events
        if e["kind"] == "partition" and "high_watermark" in e
    ]
    for e in events:
        if e["kind"] != "replica" or e["observed_at"] not in epoch_of_round:
            continue
        for stamp, epoch, hw, isr in hws:
            if (
                stamp < e["observed_at"]
                and epoch == epoch_of_round[e["observed_at"]]
                and e["broker"] in isr
            ):
                assert e["log_end_offset"] >= hw, (e, stamp, hw)
    # The simulation really produced what it claims to exercise (over the whole run of
    # examples: see test_the_simulation_reaches_losses_and_elections).


@COMMON
@given(streams(), st.booleans())
def test_every_opened_condition_can_resolve(events: list[dict[str, Any]], epochs: bool) -> None:
    """After any stream, a healthy hour resolves every condition that was left open."""
    model = ClusterModel(ModelConfig(epoch_truncation=epochs))
    findings = _run(model, events)
    heal = _heal(events)
    findings += _run(model, heal)
    findings += model.tick(heal[-1]["observed_at"])
    left = [(c.kind, cl, t, p) for cl, t, p, c in model.open_findings()]  # type: ignore[attr-defined]
    assert left == [], left
    _check_well_formed(findings)


def test_memory_bounds_are_reached_and_held() -> None:
    """Twenty elections and a hundred leader samples: the lineage and the leader's LEO
    history stop at their limits, keeping the newest entries (a random stream of 60 events
    never reaches a limit of 64)."""
    cfg = ModelConfig(lineage_limit=5, leo_history=8)
    model = ClusterModel(cfg)
    tl = Timeline(topic="bounds")
    for epoch in range(20):
        leader = 1 + epoch % 2
        for i in range(5):
            tl.replica(leader, leo=epoch * 100 + i)
            tl.advance(1_000)
        tl.meta(leader=leader, epoch=epoch, replicas=[1, 2], isr=[1, 2], hw=epoch * 100)
        tl.advance(1_000)
    _run(model, tl.events)
    s = model.partitions[("lab", "bounds", 0)]
    assert [e.epoch for e in s.lineage] == [15, 16, 17, 18, 19]
    assert s.leader_samples() <= cfg.leo_history


CLEAN_FAULTS = [
    "kill_leader", "bounce_leader", "bounce_leader", "blind_failover", "blind_failover",
    "kill", "restart", "preferred", "miss", "withhold",
]  # fmt: skip


@st.composite
def clean_failovers(draw: st.DrawFn) -> Sim:
    """Kafka's replication system test, simulated: RF 3, min ISR 2, acks=all, unclean
    elections off; brokers killed and restarted (the leader among them), preferred
    elections; the collector's JMX reads up to one interval late, scrapes missed, the new
    leader's epoch record withheld for rounds. Nothing committed can be lost here."""
    sim = Sim(
        random.Random(draw(st.integers(0, 2**32))),
        min_isr=2,
        acks_all=True,
        unclean_enabled=False,
        rate=draw(st.sampled_from([(0, 3), (1, 20)])),
        max_scrape_delay_ms=draw(st.sampled_from([300, 2_500, 4_900])),
    )
    for _ in range(draw(st.integers(2, 10))):
        sim.run(draw(st.integers(1, 30)) * 1_000)
        fault = draw(st.sampled_from(CLEAN_FAULTS))
        leader_faults = ("kill_leader", "bounce_leader", "blind_failover")
        b = sim.leader if fault in leader_faults else draw(broker_id)
        if b is None or (fault.startswith("kill") and sum(r.up for r in sim.brokers.values()) < 2):
            continue
        if fault in ("kill", "kill_leader"):
            sim.kill(b)
        elif fault == "blind_failover":
            # The leader dies; in the rounds around the election the other brokers' scrapes
            # time out and the epoch record is refused (a busy new leader).
            for x in BROKERS:
                sim.miss_scrape[x] = draw(st.integers(1, 4))
            sim.withhold_epoch_rounds = draw(st.integers(1, 4))
            sim.kill(b)
        elif fault == "bounce_leader":  # the replication test's hard bounce
            sim.kill(b)
            sim.run(draw(st.integers(1, 20)) * 1_000)
            sim.restart(b)
        elif fault == "restart":
            sim.restart(b)
        elif fault == "preferred":
            sim.preferred_election()
        elif fault == "miss":  # a scrape lost for rounds: the new leader's, typically
            sim.miss_scrape[b] = draw(st.integers(1, 3))
        else:
            sim.withhold_epoch_rounds = draw(st.integers(1, 4))
    for b in BROKERS:
        sim.restart(b)
    sim.run(90_000)
    return sim


@SIMULATED
@given(clean_failovers())
def test_clean_failovers_never_page_about_data(sim: Sim) -> None:
    """Clean elections -- with sampling up to an interval late, missed scrapes and late
    epoch records -- never yield a committed_data_loss, an unclean_election, a truncation
    below the HW or an HW regression (the simulation's ground truth: nothing was lost)."""
    assert all(clean for _t, _e, _l, clean, _s, _lost in sim.truth.elections)
    assert sum(sim.truth.shown_losses) == 0
    found = _check_reports(ClusterModel(), sim.events())
    data = [
        f
        for f in found
        if f.kind
        in (K.COMMITTED_DATA_LOSS, K.UNCLEAN_ELECTION, K.TRUNCATION_BELOW_HW, K.HW_REGRESSION)
    ]
    assert data == [], [(f.kind, f.at, f.details) for f in data]


@st.composite
def unclean_failovers(draw: st.DrawFn) -> Sim:
    """The usual road to a loss, under sampling trouble: a follower drops out (killed), the
    leader goes on alone (min ISR 1, acks=1) and dies, the follower comes back and is
    elected uncleanly -- with scrapes late, missed, and the epoch record held back."""
    rf = draw(st.sampled_from([2, 3]))
    sim = Sim(
        random.Random(draw(st.integers(0, 2**32))),
        replicas=tuple(range(1, rf + 1)),
        min_isr=1,
        acks_all=False,
        unclean_enabled=draw(st.booleans()),
        rate=draw(st.sampled_from([(0, 3), (1, 20), (5, 50)])),
        max_scrape_delay_ms=draw(st.sampled_from([300, 2_500, 4_900])),
    )
    sim.run(draw(st.integers(5, 30)) * 1_000)
    leader = sim.leader
    assert leader is not None
    others = [b for b in sim.replicas if b != leader]
    for b in others:
        sim.kill(b)
    sim.run(draw(st.integers(10, 40)) * 1_000)
    for b in sim.replicas:
        if draw(st.booleans()):
            sim.miss_scrape[b] = draw(st.integers(1, 3))
    if draw(st.booleans()):
        sim.withhold_epoch_rounds = draw(st.integers(1, 4))
    sim.kill(leader)
    sim.run(draw(st.integers(10, 20)) * 1_000)
    back = draw(st.sampled_from(others))
    sim.restart(back)
    sim.run(draw(st.integers(0, 10)) * 1_000)
    sim.unclean_elect()
    sim.run(draw(st.integers(5, 30)) * 1_000)
    if draw(st.booleans()):
        sim.restart(leader)  # the old leader returns, truncates to the new epoch
    sim.run(80_000)
    return sim


@SIMULATED
@given(unclean_failovers())
def test_unclean_elections_yield_the_exact_loss(sim: Sim) -> None:
    """Every unclean election that lost committed data is reported unclean with exactly
    the committed offsets lost below the HW the monitor was shown -- the epoch record makes
    it exact even when it comes late; a sample alone never over-reports.

    On a topic that forbids unclean elections, an election outside the ISR seen is one the
    reads may have missed the way to (a rejoin between two reads, an unreported ELR), or an
    operator's forced one: unclean by its loss, and by its membership only where the topic
    allows them (:func:`monitor.model.rules.election_membership`); a loss a truncation of
    the new leader's explains is paged as the loss, the truncation said before it."""
    found = _check_reports(ClusterModel(), sim.events())
    reported: dict[int, int] = {}
    for f in found:
        if f.kind == K.COMMITTED_DATA_LOSS:
            epoch = f.details["epoch"]
            reported[epoch] = reported.get(epoch, 0) + f.details["lost_count"]
    unclean = {f.details["epoch"] for f in found if f.kind == K.UNCLEAN_ELECTION}
    for (_t, epoch, leader, clean, _s, _lost), shown in zip(
        sim.truth.elections, sim.truth.shown_losses, strict=True
    ):
        assert reported.get(epoch, 0) == shown, (epoch, reported, sim.truth.elections)
        if not clean and sim.unclean_enabled:
            assert epoch in unclean, (epoch, sim.truth.elections)
        elif not clean and shown and epoch not in unclean:
            # Forced on a topic that forbids it, after the new leader's own truncation was
            # seen: the loss is paged (above, exactly), the truncation its explanation.
            assert any(f.kind == K.TRUNCATION_BELOW_HW and f.broker == leader for f in found), (
                epoch,
                sim.truth.elections,
            )


@SIMULATED
@given(simulated())
def test_a_loss_is_never_over_reported_and_exact_with_the_epoch_record(sim: Sim) -> None:
    """Per election, the model reports no more committed offsets lost than the simulation
    lost below the HW it was shown; with the new leader's epoch record (the collector asks
    every round until answered), exactly that many."""
    found = _check_reports(ClusterModel(), sim.events())
    reported: dict[int, int] = {}
    for f in found:
        if f.kind == K.COMMITTED_DATA_LOSS:
            reported[f.details["epoch"]] = (
                reported.get(f.details["epoch"], 0) + f.details["lost_count"]
            )
    truth = {
        e[1]: lost for e, lost in zip(sim.truth.elections, sim.truth.shown_losses, strict=True)
    }
    for epoch, n in reported.items():
        assert n <= truth.get(epoch, 0), (epoch, n, truth, sim.truth.elections)
    unverified = {f.details["epoch"] for f in found if f.kind == K.ELECTION_UNVERIFIED}
    for epoch, lost in truth.items():
        if lost and epoch not in unverified:
            assert reported.get(epoch, 0) == lost, (epoch, reported, truth, sim.truth.elections)


def test_the_simulation_reaches_losses_and_elections() -> None:
    """The simulated runs are not vacuous: this one (the "isolate" storyline) loses
    committed data in an unclean election, and the model reports exactly the committed
    offsets below the last HW it was shown."""
    sim = Sim(random.Random(3), replicas=(1, 2), min_isr=1, acks_all=False, rate=(1, 20))
    sim.run(20_000)
    sim.kill(2)  # the follower drops out of the ISR; the leader goes on alone
    sim.run(30_000)
    sim.kill(1)  # ... and dies: offline
    sim.run(15_000)
    sim.restart(2)
    sim.run(5_000)
    assert sim.unclean_elect()
    sim.run(30_000)
    [*_, (_t, epoch, leader, clean, start, lost)] = sim.truth.elections
    assert (leader, clean) == (2, False) and lost > 0
    found = _check_reports(ClusterModel(), sim.events())
    losses = [f for f in found if f.kind == K.COMMITTED_DATA_LOSS]
    assert [f.details["epoch"] for f in losses] == [epoch]
    assert losses[0].details["lost_from"] == start
    assert losses[0].details["lost_count"] == sim.truth.shown_losses[-1]
    assert any(f.kind == K.UNCLEAN_ELECTION for f in found)


def _replay_ids_in_subprocess(hash_seed: str, paths: list[Path]) -> list[str]:
    code = (
        "import sys, json\n"
        "from monitor.model import ClusterModel\n"
        "from monitor.query.replay import replay\n"
        "ids = []\n"
        "for p in sys.argv[1:]:\n"
        "    fs = []\n"
        "    replay(open(p, 'rb').read().splitlines(), ClusterModel(), fs.append, "
        "lambda n, r: None)\n"
        "    ids += [f.id + ' ' + json.dumps(f.to_dict(), sort_keys=True) for f in fs]\n"
        "print(json.dumps(ids))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, paths)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: list[str] = json.loads(out.stdout)
    return result


def test_findings_are_the_same_in_processes_with_different_hash_seeds(tmp_path: Path) -> None:
    """Finding ids are the sinks' dedup key and the store's join key: a batch replayed by
    another executor (another ``PYTHONHASHSEED``) must give the same findings, in the same
    order, with the same details -- nothing may depend on set or dict iteration order."""
    sim = Sim(random.Random(7), unclean_enabled=True, min_isr=1, acks_all=False, rate=(1, 20))
    sim.run(20_000)
    sim.kill(1)
    sim.run(15_000)
    sim.kill(2)
    sim.run(15_000)
    sim.restart(1)
    sim.run(30_000)
    sim_file = tmp_path / "sim.jsonl"
    sim_file.write_text("".join(json.dumps(e) + "\n" for e in sim.events()))
    paths = [*sorted((ROOT / "tests" / "data").glob("*.jsonl")), sim_file]
    a = _replay_ids_in_subprocess("1", paths)
    b = _replay_ids_in_subprocess("2024", paths)
    assert len(a) > 100
    assert a == b
