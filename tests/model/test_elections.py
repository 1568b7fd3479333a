"""Elections judged on evidence, in the order events really arrive in the Spark job (by
micro-batch, not by stamp): what a late sample or a late epoch record changes, and what it
must not (monitor.model.election)."""

from __future__ import annotations

import json

from monitor.contract.events import parse_event, to_model
from monitor.dev.testing import Timeline
from monitor.model import ClusterModel, Finding, FindingKind

K = FindingKind
DATA = {K.COMMITTED_DATA_LOSS, K.UNCLEAN_ELECTION, K.TRUNCATION_BELOW_HW, K.HW_REGRESSION}


def _apply(model: ClusterModel, events: list[dict[str, object]]) -> list[Finding]:
    return [f for e in events for f in model.apply(to_model(parse_event(json.dumps(e))))]


def _before_the_election() -> tuple[Timeline, int]:
    """Three healthy rounds, followers a fetch behind, the HW read 40 ms after the pages."""
    tl = Timeline(topic="t")
    tl.config(rf=3, min_isr=2)
    leo = 100_000
    for _ in range(3):
        leo += 5_000
        for b in (1, 2, 3):
            tl.replica(b, leo=leo if b == 1 else leo - 5)
        tl.advance(2)
        tl.meta(leader=1, epoch=5, replicas=[1, 2, 3], isr=[1, 2, 3], hw=leo + 40)
        tl.advance(4_998)
    return tl, leo


def test_the_election_rounds_sample_arriving_after_its_partition_event() -> None:
    """The new leader's page of the election round is stamped with the round's start, but
    its slow scrape reaches the job in a later micro-batch than the partition event. Judged
    on its previous sample (older than the HW) this was a false loss; now the election waits
    for it -- and the sample (it holds the committed HW) settles it."""
    tl, leo = _before_the_election()
    tl.replica(3, leo=leo + 5_000)
    page = tl.replica(2, leo=leo + 5_000)  # the slow one
    tl.events.remove(page)
    tl.advance(2)
    tl.meta(leader=2, epoch=6, replicas=[1, 2, 3], isr=[2, 3], hw=leo + 5_000)
    model = ClusterModel()
    found = _apply(model, tl.events)
    assert [f.kind for f in found if f.kind == K.ELECTION_PENDING] == [K.ELECTION_PENDING]
    found += _apply(model, [page])  # 3 s later, in the next micro-batch
    assert not [f for f in found if f.kind in DATA], found
    assert [str(f.state) for f in found if f.kind == K.ELECTION_PENDING] == ["open", "resolved"]


def test_an_epoch_record_a_round_late_changes_nothing_after_no_loss() -> None:
    """Decided on a sample (it held the committed HW), then the epoch record arrives: it
    says where the epoch began -- in the lineage -- and no loss."""
    tl, leo = _before_the_election()
    for b in (2, 3):
        tl.replica(b, leo=leo + 5_000)
    tl.advance(2)
    tl.meta(leader=2, epoch=6, replicas=[1, 2, 3], isr=[2, 3], hw=leo + 5_000)
    tl.advance(4_998)
    tl.replica(2, leo=leo + 10_000)
    tl.advance(2)
    tl.meta(leader=2, epoch=6, replicas=[1, 2, 3], isr=[2, 3], hw=leo + 9_990,
            epoch_start=leo + 5_000)  # fmt: skip
    model = ClusterModel()
    found = _apply(model, tl.events)
    assert not [f for f in found if f.kind in DATA], found
    assert model.partitions[("lab", "t", 0)].lineage[-1].start_offset == leo + 5_000


def test_a_paged_loss_is_never_withdrawn_only_corrected_upward() -> None:
    """An unclean election judged on the new leader's first sample as leader (a lower
    bound: it appended since), then its epoch record: the offsets the sample missed are
    reported as a correction; the first finding stands."""
    tl = Timeline(topic="t")
    tl.config(rf=2, min_isr=1, unclean=True)
    tl.replica(1, leo=1_000)
    tl.replica(2, leo=1_000)
    tl.meta(leader=1, epoch=1, replicas=[1, 2], isr=[1, 2], hw=1_000)
    tl.advance(5_000)
    tl.replica(1, leo=5_000)
    tl.meta(leader=1, epoch=1, replicas=[1, 2], isr=[1], hw=5_000)
    tl.advance(5_000)
    tl.meta(leader=2, epoch=2, replicas=[1, 2], isr=[2], hw=1_000)  # no record yet
    tl.advance(5_000)
    tl.replica(2, leo=1_200)  # first sample as leader: it appended 200
    tl.advance(2)
    tl.meta(leader=2, epoch=2, replicas=[1, 2], isr=[2], hw=1_200, epoch_start=1_000)
    found = _apply(ClusterModel(), tl.events)
    losses = [(f.details["lost_from"], f.details["lost_to"], f.details["leo_sampled"])
              for f in found if f.kind == K.COMMITTED_DATA_LOSS]  # fmt: skip
    assert losses == [(1_200, 5_000, "sample"), (1_000, 1_200, "epoch")]
    assert [f.details["witness"] for f in found if f.kind == K.UNCLEAN_ELECTION] == ["membership"]


def test_a_record_above_a_sampled_verdict_does_not_raise_the_committed_hw() -> None:
    """Found by the stream property test: a loss judged on a sample (LEO 0, HW 1), then the
    epoch record says the leader held 2. The paged loss stands; the committed reference is
    rebased to what the new leader holds but never above the HW that was committed (1): the
    next election is judged against 1, a HW the stream showed, not 2. (HW 1 read twice: a
    first HW read once is held until confirmed -- test_impossible_samples.)"""
    tl = Timeline(topic="p")
    tl.meta(leader=None, epoch=0, replicas=[1, 2, 3], isr=[], hw=1)
    tl.advance(1).meta(leader=None, epoch=0, replicas=[1, 2, 3], isr=[], hw=1)
    tl.advance(1).replica(1, leo=0)
    tl.meta(leader=1, epoch=5, replicas=[1, 2, 3], isr=[])
    tl.advance(1).replica(1, leo=0)
    tl.meta(leader=None, epoch=5, replicas=[1, 2, 3], isr=[], epoch_start=2)
    tl.advance(1).meta(leader=2, epoch=6, replicas=[1, 2, 3], isr=[])
    tl.replica(2, leo=0, hw=3)
    found = _apply(ClusterModel(), tl.events)
    elections = [f for f in found if f.kind == FindingKind.LEADER_ELECTION]
    assert [f.details["committed_hw_before"] for f in elections] == [1, 1], found
    losses = [f for f in found if f.kind == FindingKind.COMMITTED_DATA_LOSS]
    assert all(f.details["lost_to"] <= 1 for f in losses), losses
