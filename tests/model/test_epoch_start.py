"""The new leader's log end at its election: the leader's own epoch record beats a sample.

Found by the demo: the follower's last LEO sample said 12,609, but it restarted holding
12,385 and was elected at that; the monitor reported 224 committed offsets too few. With
the epoch's start offset (OffsetsForLeaderEpoch, sent by the collector once per epoch)
the loss is exact and the restart's truncation is reported.
"""

from __future__ import annotations

from monitor.contract.events import parse_event, to_model
from monitor.dev.testing import Timeline
from monitor.model import ClusterModel, Finding, FindingKind

K = FindingKind


def _incident(epoch_start: int | None) -> list[Finding]:
    tl = Timeline(topic="t")
    tl.config(rf=2, min_isr=1, unclean=False)
    tl.meta(leader=1, epoch=1, replicas=[1, 2], isr=[1, 2], hw=1000, epoch_start=0)
    tl.replica(1, leo=1000)
    tl.replica(2, leo=1000)
    tl.advance(1_000)
    tl.meta(leader=1, epoch=1, replicas=[1, 2], isr=[1, 2], hw=1224)
    tl.replica(1, leo=1224)
    tl.replica(2, leo=1224)  # the follower's last sample before it stops
    tl.advance(1_000)
    tl.meta(leader=1, epoch=1, replicas=[1, 2], isr=[1], hw=1500)  # leader alone commits
    tl.replica(1, leo=1500)
    tl.advance(1_000)
    tl.meta(leader=None, epoch=2, replicas=[1, 2], isr=[1])  # leader killed
    tl.advance(1_000)
    # Broker 2 restarted holding 1000 (no sample of that), then was elected uncleanly.
    tl.meta(leader=2, epoch=3, replicas=[1, 2], isr=[2], hw=1000, epoch_start=epoch_start)
    tl.advance(1_000)
    tl.replica(2, leo=1050)  # new writes on the new leader
    tl.meta(leader=2, epoch=3, replicas=[1, 2], isr=[2], hw=1050)
    model = ClusterModel()
    out: list[Finding] = []
    for line in tl.jsonl().splitlines():
        out.extend(model.apply(to_model(parse_event(line))))
    return out


def test_epoch_start_makes_the_loss_exact_and_reports_the_truncation() -> None:
    found = _incident(epoch_start=1000)
    (loss,) = [f for f in found if f.kind == K.COMMITTED_DATA_LOSS]
    assert (loss.details["lost_from"], loss.details["lost_to"]) == (1000, 1500)
    assert loss.details["lost_count"] == 500
    assert loss.details["leo_sampled"] == "epoch"
    (trunc,) = [f for f in found if f.kind == K.TRUNCATION_BELOW_HW]
    assert trunc.broker == 2 and (trunc.details["leo_before"], trunc.details["leo"]) == (1224, 1000)
    election = next(f for f in found if f.kind == K.LEADER_ELECTION and f.details["epoch"] == 3)
    assert election.details["start_offset"] == 1000


def test_without_it_the_loss_rests_on_a_sample_taken_after_the_election() -> None:
    """Without the epoch record: its last sample before (1224) is older than the committed
    HW it would be compared with -- not evidence; its first sample as leader (1050: it has
    appended 50 since) bounds the loss from below: at least 450 of the 500."""
    (loss,) = [f for f in _incident(epoch_start=None) if f.kind == K.COMMITTED_DATA_LOSS]
    assert (loss.details["lost_from"], loss.details["lost_count"]) == (1050, 450)
    assert loss.details["leo_sampled"] == "sample"


def test_a_late_epoch_record_corrects_the_sampled_loss() -> None:
    """The collector could not ask the new leader in the election's round (it was still
    loading): the sampled loss is reported first, the epoch record adds the rest."""
    tl = Timeline(topic="t")
    tl.config(rf=2, min_isr=1, unclean=False)
    tl.meta(leader=1, epoch=1, replicas=[1, 2], isr=[1, 2], hw=1224)
    tl.replica(1, leo=1224)
    tl.replica(2, leo=1224)
    tl.advance(1_000)
    tl.meta(leader=1, epoch=1, replicas=[1, 2], isr=[1], hw=1500)
    tl.replica(1, leo=1500)
    tl.advance(1_000)
    tl.meta(leader=None, epoch=2, replicas=[1, 2], isr=[1])
    tl.advance(1_000)
    tl.meta(leader=2, epoch=3, replicas=[1, 2], isr=[2], hw=1000)  # no epoch record yet
    tl.advance(1_000)
    tl.replica(2, leo=1050)
    tl.meta(leader=2, epoch=3, replicas=[1, 2], isr=[2], hw=1050, epoch_start=1000)
    tl.advance(1_000)
    tl.meta(leader=2, epoch=3, replicas=[1, 2], isr=[2], hw=1100, epoch_start=1000)
    model = ClusterModel()
    events = [to_model(parse_event(line)) for line in tl.jsonl().splitlines()]
    found = [f for ev in events for f in model.apply(ev)]
    losses = [f for f in found if f.kind == K.COMMITTED_DATA_LOSS]
    assert [(f.details["lost_from"], f.details["lost_to"]) for f in losses] == [
        (1050, 1500),  # on its first sample as leader: a lower bound
        (1000, 1050),  # the epoch record's correction
    ]
    assert sum(f.details["lost_count"] for f in losses) == 500  # exact: [1000, 1500)
    (trunc,) = [f for f in found if f.kind == K.TRUNCATION_BELOW_HW]
    assert (trunc.broker, trunc.details["leo_before"], trunc.details["leo"]) == (2, 1224, 1000)
    assert not [f for f in found if f.kind == K.HW_REGRESSION]
    lineage = model.partitions[("lab", "t", 0)].lineage
    assert lineage[-1].start_offset == 1000
