"""Routine operations that happen between two collection rounds, on the real lab: the
collector sees only their ends, and nothing may page.

Each was a false critical page found by review (replayed from hand-written events, then
reproduced here): a reassignment begun and ended between two reads (a new leader outside
the last ISR, none of which is in the new one); a rolling restart's failback whose rejoin
and preferred election both fall between two reads, while the returning leader carries a
truncation mark; a follower refilling its log after a disk replacement; an RF 2 topic's
rolling restart whose rejoin and failover fall between two reads. The scenarios
``reassignment_between_reads``, ``failback_old_leader_ahead``, ``follower_disk_replaced``
and ``rolling_restart_rf2_between_reads`` (tests/data) hold the same cases as events. The
rounds are driven by hand (:class:`HandRounds`): "between two reads" is then what the test
does between two calls.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import monitor.collector.collector as collector_module
from monitor.dev.lab.admin import (
    create_topic,
    elect_leader,
    reassign,
    reassignments,
    throttle,
    unthrottle,
    wait_for_every_broker,
    wait_for_partitions,
)
from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.gate import EndpointGate
from monitor.dev.lab.load import fill, produce, verify
from monitor.model import FindingKind, Severity
from tests.collector.helpers import EpochRecordHold, HandRounds, Load, names

pytestmark = pytest.mark.lab

K = FindingKind


def test_a_reassignment_between_two_reads_is_a_handover(lab: Lab, tmp_path: Path) -> None:
    """An RF 1 partition moved from broker 2 to 3 while the collector does not look (a
    small partition moves in a second or two): the next round shows leader 3, ISR [3] --
    outside the last ISR [2], none of it in the new one. 3 was no replica when last seen:
    a reassignment's handover (``reassigned_to``), judged by its log -- no unclean
    election, nothing critical, nothing lost."""
    topic = "br-move"
    acks = tmp_path / "acks.jsonl"
    create_topic(lab.bootstrap_servers, topic, assignments={0: [2]}, min_insync_replicas=1)
    with HandRounds(lab, lab.jmx_urls, tmp_path / "events.jsonl") as rounds:
        produce(lab.bootstrap_servers, topic, rate=400, count=300, acks="all", log_path=acks)
        rounds.until("HW 300", lambda e: e.high_watermark == 300, topic)
        rounds.round()
        # -- no round until the move is over --
        reassign(lab.bootstrap_servers, topic, {0: [3]})
        deadline = time.monotonic() + 60
        while any(k[0] == topic for k in reassignments(lab.bootstrap_servers)):
            assert time.monotonic() < deadline, "the reassignment did not finish"
            time.sleep(0.2)
        wait_for_every_broker(  # each broker's own metadata (the failback's note)
            lab.bootstrap_servers, topic, [1, 2, 3],
            lambda ps: list(ps[0].replicas) == [3] and ps[0].leader == 3, timeout_s=30,
            what="moved to [3]",
        )  # fmt: skip
        moved = rounds.until("led by 3", lambda e: e.leader == 3, topic, rounds=1)
        assert moved.replicas == [3] and not moved.adding_replicas
        if moved.epoch_start_offset is None:
            rounds.until("the epoch record", lambda e: e.epoch_start_offset is not None, topic)
        rounds.round()
    report = verify(lab.bootstrap_servers, topic, acks, settle_s=5)
    assert report.acknowledged == 300 and report.lost_count == 0, report.render()
    mine = rounds.of(topic)
    election = [f for f in mine if f.kind == K.LEADER_ELECTION]
    assert [(f.broker, f.details["membership"]) for f in election] == [(3, "reassigned_to")]
    assert not [
        f for f in mine
        if f.kind in (K.UNCLEAN_ELECTION, K.COMMITTED_DATA_LOSS)
        or f.severity is Severity.CRITICAL
    ], names(mine)  # fmt: skip


def test_a_failback_between_two_reads_is_no_loss(
    lab: Lab,
    gates: dict[int, EndpointGate],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rolling restart's two steps under acks=all load, the collector without epoch
    records throughout (an older collector, or the request failing): the followers'
    exporters are blind for the failover round, so the new epoch's start is guessed from
    the new leader's last sample, below 1's -- 1 is marked as due to truncate. 1 stops
    (controlled), comes back, truncates, catches up, rejoins the ISR and is elected back
    (preferred) -- rejoin and election between two reads. Its old suffix proves nothing
    once it may have rejoined: no committed_data_loss, no unclean_election (the topic
    allows none), and the consumer confirms nothing was lost. (The model before this fix
    paged both.)"""
    topic = "br-failback"
    acks = tmp_path / "acks.jsonl"
    create_topic(lab.bootstrap_servers, topic, assignments={0: [1, 2, 3]}, min_insync_replicas=2)
    held = EpochRecordHold(monkeypatch).held
    urls = {b: g.url for b, g in gates.items()}
    with HandRounds(lab, urls, tmp_path / "events.jsonl") as rounds:
        load = Load(lab, topic, acks, rate=400)
        try:
            rounds.until("committing under load", lambda e: (e.high_watermark or 0) > 800, topic)
            rounds.round()
            held.set()
            for b in (2, 3):  # whichever takes over, its last sample is stale
                gates[b].block()
            time.sleep(1.0)
            rounds.until("led by 1, 2 and 3 unseen", lambda e: e.leader == 1, topic)
            lab.stop(1)
            failover = rounds.until("led by 2 or 3", lambda e: e.leader in (2, 3), topic, 90)
            for b in (2, 3):
                gates[b].open()
            for _ in range(3):
                rounds.round()
            # -- no round from here until 1 leads again --
            lab.start(1)
            wait_for_partitions(
                lab.bootstrap_servers, topic, lambda ps: 1 in ps[0].isr, timeout_s=90,
                what="1 back in the ISR",
            )  # fmt: skip
            elect_leader(lab.bootstrap_servers, topic, 0, unclean=False)
            # The round asks whichever broker its client likes, and each answers from its own
            # metadata, which the election reaches broker by broker (a CI run's one round
            # after the Admin API showed 1 leading did not): wait until every broker says so.
            wait_for_every_broker(
                lab.bootstrap_servers, topic, [1, 2, 3], lambda ps: ps[0].leader == 1,
                timeout_s=60, what="led by 1 again",
            )  # fmt: skip
            back = rounds.until("led by 1 again", lambda e: e.leader == 1, topic, rounds=1)
            assert 1 in back.isr
            for _ in range(3):
                rounds.round()
        finally:
            stats = load.finish()
    report = verify(lab.bootstrap_servers, topic, acks, settle_s=10)
    assert report.lost_count == 0 and report.acknowledged > 800, report.render()
    assert stats.acked == report.acknowledged
    mine = rounds.of(topic)
    elections = [f for f in mine if f.kind == K.LEADER_ELECTION]
    assert [f.broker for f in elections] == [failover.leader, 1], names(mine)
    # The failback's membership: 1 outside the last ISR seen, back in the new one.
    assert elections[1].details["membership"] == "rejoined_with_last_isr", elections[1].details
    assert not [
        f for f in mine
        if f.kind in (K.UNCLEAN_ELECTION, K.COMMITTED_DATA_LOSS, K.ELECTION_UNVERIFIED)
        or f.severity is Severity.CRITICAL
    ], names(mine)  # fmt: skip


def test_an_rf2_rolling_restart_between_two_reads_is_no_page(lab: Lab, tmp_path: Path) -> None:
    """An RF 2 topic (min ISR 1, unclean elections off) under acks=all load: broker 2
    restarts and a round sees ISR [1]; then, between two reads, 2 comes back and rejoins
    the ISR, and 1 is restarted -- its controlled shutdown hands leadership to 2. The next
    round shows leader 2 with ISR [2]: outside the last ISR seen, none of it in the new
    one, as an unclean election looks. The topic forbids those, so Kafka elected 2 from an
    ISR the reads missed (``outside_last_isr_unclean_disabled``), and its log shows nothing
    lost: no unclean_election, nothing critical -- the consumer confirms it. (The model
    before this fix paged unclean_election on membership.)"""
    topic = "br-rf2"
    acks = tmp_path / "acks.jsonl"
    create_topic(lab.bootstrap_servers, topic, assignments={0: [1, 2]}, min_insync_replicas=1)
    with HandRounds(lab, lab.jmx_urls, tmp_path / "events.jsonl") as rounds:
        load = Load(lab, topic, acks, rate=400)
        try:
            rounds.until("committing under load", lambda e: (e.high_watermark or 0) > 400, topic)
            lab.stop(2)
            rounds.until("ISR [1]", lambda e: list(e.isr) == [1], topic, 90)
            rounds.round()
            # -- no round from here until 2 leads --
            lab.start(2)
            wait_for_partitions(
                lab.bootstrap_servers, topic, lambda ps: 2 in ps[0].isr, timeout_s=90,
                what="2 back in the ISR",
            )  # fmt: skip
            lab.stop(1)
            wait_for_every_broker(  # each live broker's own metadata (the failback's note)
                lab.bootstrap_servers, topic, [2, 3], lambda ps: ps[0].leader == 2,
                timeout_s=60, what="led by 2",
            )  # fmt: skip
            led = rounds.until("led by 2", lambda e: e.leader == 2, topic, rounds=1)
            assert list(led.isr) == [2], led
            if led.epoch_start_offset is None:
                rounds.until("the epoch record", lambda e: e.epoch_start_offset is not None, topic)
            lab.start(1)
            rounds.until("1 back in the ISR", lambda e: 1 in e.isr, topic, 90)
            rounds.round()
        finally:
            stats = load.finish()
    report = verify(lab.bootstrap_servers, topic, acks, settle_s=10)
    assert report.lost_count == 0 and report.acknowledged > 400, report.render()
    assert stats.acked == report.acknowledged
    mine = rounds.of(topic)
    elections = [f for f in mine if f.kind == K.LEADER_ELECTION]
    assert [(f.broker, f.details["membership"]) for f in elections[:1]] == [
        (2, "outside_last_isr_unclean_disabled")
    ], names(mine)
    assert not [
        f for f in mine
        if f.kind in (K.UNCLEAN_ELECTION, K.COMMITTED_DATA_LOSS, K.ELECTION_UNVERIFIED)
        or f.severity is Severity.CRITICAL
    ], names(mine)  # fmt: skip


def test_a_clean_failover_during_a_slow_scrape_is_no_page(
    lab: Lab,
    gates: dict[int, EndpointGate],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A round's samples carry the round's start, but a page may be read seconds later:
    here broker 2's page is held until 1 has stopped (controlled shutdown) and 2 leads and
    has appended, so its sample -- stamped before that round's metadata, which still says
    leader 1 -- holds more than epoch 2's start. The election's round has no page of 2 (its
    exporter blocked) and the epoch record comes later, once the new epoch's HW has passed
    that sample. Judged against the HW committed before the election, nothing was
    truncated: no truncation_below_hw, nothing critical, the consumer confirms nothing was
    lost. (The model before this fix paged a truncation below the new epoch's own HW;
    scenario ``clean_failover_slow_scrape``.)"""
    topic = "br-slow"
    acks = tmp_path / "acks.jsonl"
    create_topic(lab.bootstrap_servers, topic, assignments={0: [1, 2, 3]}, min_insync_replicas=2)
    held = EpochRecordHold(monkeypatch).held
    slow, release, meta_read = (threading.Event() for _ in range(3))
    real_read_metadata = collector_module.read_metadata
    real_fetch = collector_module.jmx.fetch

    def read_metadata(*args: Any) -> Any:
        answer = real_read_metadata(*args)
        meta_read.set()
        return answer

    def fetch(url: str, timeout_s: float, max_bytes: int) -> str:
        if url == gates[2].url and slow.is_set():
            release.wait(60)  # read once 2 leads
        return real_fetch(url, timeout_s, max_bytes)

    monkeypatch.setattr(collector_module, "read_metadata", read_metadata)
    monkeypatch.setattr(collector_module.jmx, "fetch", fetch)
    urls = {b: g.url for b, g in gates.items()}
    with HandRounds(lab, urls, tmp_path / "events.jsonl", round_timeout_s=90) as rounds:
        load = Load(lab, topic, acks, rate=400)
        try:
            rounds.until("committing under load", lambda e: (e.high_watermark or 0) > 800, topic)
            rounds.until("led by 1", lambda e: e.leader == 1 and len(e.isr) == 3, topic)
            held.set()
            slow.set()
            meta_read.clear()
            slow_round = threading.Thread(target=rounds.round)
            slow_round.start()
            try:
                assert meta_read.wait(30), "the round read no metadata"
                lab.stop(1)
                wait_for_partitions(
                    lab.bootstrap_servers, topic, lambda ps: ps[0].leader == 2, timeout_s=60,
                    what="led by 2",
                )  # fmt: skip
                time.sleep(1.0)  # 2 appends as leader
            finally:
                slow.clear()
                release.set()
                slow_round.join(90)
            gates[2].block()
            wait_for_every_broker(  # each live broker's own metadata too (the failback's note)
                lab.bootstrap_servers, topic, [2, 3], lambda ps: ps[0].leader == 2,
                timeout_s=30, what="led by 2",
            )  # fmt: skip
            elected = rounds.until("led by 2", lambda e: e.leader == 2, topic, rounds=1)
            assert elected.epoch_start_offset is None
            gates[2].open()
            for _ in range(3):
                rounds.round()
            held.clear()
            rounds.until("the epoch record", lambda e: e.epoch_start_offset is not None, topic)
            lab.start(1)
            rounds.until("1 back in the ISR", lambda e: 1 in e.isr, topic, 90)
            rounds.round()
        finally:
            stats = load.finish()
    report = verify(lab.bootstrap_servers, topic, acks, settle_s=10)
    assert report.lost_count == 0 and report.acknowledged > 800, report.render()
    assert stats.acked == report.acknowledged
    mine = rounds.of(topic)
    elections = [f for f in mine if f.kind == K.LEADER_ELECTION]
    assert [(f.broker, f.details["membership"]) for f in elections[:1]] == [(2, "in_last_isr")], (
        names(mine)
    )
    assert not [
        f for f in mine
        if f.kind in (K.TRUNCATION_BELOW_HW, K.UNCLEAN_ELECTION, K.COMMITTED_DATA_LOSS)
        or f.severity is Severity.CRITICAL
    ], names(mine)  # fmt: skip


def test_a_follower_refilling_after_a_disk_replacement_is_a_ticket(
    lab: Lab, tmp_path: Path
) -> None:
    """Broker 3's copy of a partition is wiped while it is stopped (a disk replaced) and
    copied again from the leader, throttled so that rounds see it: its log end falls far
    below the committed HW. Leader 1 and broker 2 still hold every committed offset: a
    warning (truncation_below_hw, a ticket), no page."""
    topic = "br-disk"
    acks = tmp_path / "acks.jsonl"
    create_topic(lab.bootstrap_servers, topic, assignments={0: [1, 2, 3]}, min_insync_replicas=2)
    fill(lab.bootstrap_servers, topic, partitions=[0], megabytes=4)
    with HandRounds(lab, lab.jmx_urls, tmp_path / "events.jsonl") as rounds:
        produce(lab.bootstrap_servers, topic, rate=400, count=200, acks="all", log_path=acks)
        full = rounds.until("a full ISR", lambda e: sorted(e.isr) == [1, 2, 3], topic)
        rounds.round()
        lab.stop(3)
        shutil.rmtree(lab.config.data_dir(3) / f"{topic}-0")
        # Kafka's quota is a rate over an 11-s window: ~1.1 MB go at once, the rest at
        # 100 kB/s -- ~29 s of copying after the broker's start, rounds a second apart
        # (with 2 MB, ~9 s: a CI run whose broker took that long to serve its first page
        # saw the copy already done, and no finding).
        throttle(lab.bootstrap_servers, topic, 100_000)
        try:
            lab.start(3, wait=False)  # rounds from its first page on, mid-copy
            rounds.until("3 back in the ISR", lambda e: 3 in e.isr, topic, rounds=120)
        finally:
            unthrottle(lab.bootstrap_servers, topic)
        rounds.round()
    report = verify(lab.bootstrap_servers, topic, acks, settle_s=5)
    assert report.lost_count == 0, report.render()
    mine = rounds.of(topic)
    truncated = [f for f in mine if f.kind == K.TRUNCATION_BELOW_HW]
    assert [(f.broker, f.severity) for f in truncated] == [(3, Severity.WARNING)], names(mine)
    assert truncated[0].details["committed_hw"] >= (full.high_watermark or 0)
    assert not [f for f in mine if f.severity is Severity.CRITICAL], names(mine)
