"""Thresholds of the model, with defaults tied to Kafka's own settings."""

from __future__ import annotations

from dataclasses import dataclass

#: Kafka's default ``replica.lag.time.max.ms`` (30 s since Kafka 2.5; older articles say 10 s).
KAFKA_REPLICA_LAG_TIME_MAX_MS = 30_000


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """How sensitive the model is. All times are milliseconds.

    The lag thresholds default to Kafka's ``replica.lag.time.max.ms``: a follower that has
    not caught up for that long is one Kafka itself would drop from the ISR, so anything
    shorter is normal replication noise. Set them to at least three collection intervals:
    telemetry is sampled, and a follower sampled just before a fetch looks briefly behind.
    """

    #: Follower not caught up to the leader's LEO for this long -> ``follower_lag``.
    follower_lag_ms: int = KAFKA_REPLICA_LAG_TIME_MAX_MS
    #: Optional offset threshold as well (off by default: offsets scale with throughput).
    follower_lag_offsets: int | None = None
    #: HW not caught up to the leader's LEO for this long -> ``hw_lag`` (acks=all stalls).
    hw_lag_ms: int = KAFKA_REPLICA_LAG_TIME_MAX_MS
    #: No telemetry for a partition or broker for this long -> ``stale_telemetry``.
    stale_after_ms: int = 60_000
    #: This many leader elections within ``flapping_window_ms`` -> ``leader_flapping``.
    flapping_elections: int = 3
    flapping_window_ms: int = 600_000
    #: ``min.insync.replicas`` assumed until a ``topic_config`` event says otherwise
    #: (Kafka's broker default is 1).
    default_min_insync_replicas: int = 1
    #: Epoch regressions are believed only when the lower epoch is observed this much later
    #: than the higher one (several collectors may disagree by their clock skew).
    clock_skew_ms: int = 5_000
    #: Leader LEO samples kept per partition to turn offset lag into time lag.
    leo_history: int = 32
    #: Leader-epoch lineage entries kept per partition.
    lineage_limit: int = 64
    #: An election whose sampled evidence shows a loss waits this long for the new leader's
    #: exact epoch record before the loss is judged on the sample (the collector asks for it
    #: every round until answered: two rounds).
    epoch_record_wait_ms: int = 10_000
    #: An election with no evidence at all (no epoch record, no LEO sample of the new leader
    #: taken after the committed HW) is ``election_pending`` this long, then reported as
    #: ``election_unverified`` (the loss is unknown).
    election_evidence_wait_ms: int = 60_000
    #: Kafka >= 0.11 truncates a returning follower to the new epoch's start offset
    #: (KIP-101). Set False only to replay pre-epoch (HW-truncation) protocol walk-throughs:
    #: then a replica ahead of a new epoch's start that rejoins without being seen to
    #: truncate is reported as ``log_divergence``.
    epoch_truncation: bool = True
    #: A controller's unclean-election counter is believed to count new elections only
    #: after it has been reported this long without a gap or a drop: a restarted controller
    #: replays the metadata log and may count old elections again while it starts.
    counter_warmup_ms: int = 30_000
    #: An event stamped further ahead than this of an independent clock -- its Kafka
    #: record's timestamp in the job, the other sources' newest stamp in a replay -- is
    #: rejected (:mod:`monitor.model.stamps`): one stamp in the future would make every later
    #: event of its source late.
    max_stamp_ahead_ms: int = 60_000
    #: A topic absent from the metadata reads this long while its cluster's other topics
    #: are read (their ``topic_config`` events keep coming) is forgotten as deleted -- in
    #: case the collector's ``topic_deleted`` event was lost (a collector restarted across
    #: the deletion knows nothing of the topic). Silence alone never forgets anything.
    forget_absent_ms: int = 600_000

    def __post_init__(self) -> None:
        """Every threshold checked here, once: the Spark job's settings *are* this class, so
        a bad value stops ``monitor stream`` before Spark or the metrics port start."""
        for name, low in (
            ("follower_lag_ms", 1), ("hw_lag_ms", 1), ("stale_after_ms", 1),
            ("flapping_window_ms", 1), ("flapping_elections", 2), ("leo_history", 2),
            ("lineage_limit", 1), ("default_min_insync_replicas", 1), ("clock_skew_ms", 0),
            ("epoch_record_wait_ms", 0), ("election_evidence_wait_ms", 1),
            ("counter_warmup_ms", 0), ("max_stamp_ahead_ms", 0),
            ("forget_absent_ms", 1),
        ):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"ModelConfig.{name} must be an integer >= {low}, got {value!r}")
        if self.follower_lag_offsets is not None and self.follower_lag_offsets < 1:
            raise ValueError(
                f"ModelConfig.follower_lag_offsets must be >= 1 or None, "
                f"got {self.follower_lag_offsets}"
            )
