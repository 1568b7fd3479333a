"""The watermark model: pure Python, no Spark, no Kafka client, no clock, no I/O.

Drive it with :func:`step` (one partition) or :class:`ClusterModel` (many), feeding the
event records of :mod:`monitor.model.events`; read findings and state back.

Where ``make setup`` compiled it (:mod:`monitor.model._native`), the same modules load as
C extensions built by mypyc from these sources; ``NATIVE_NOTE`` says which runs.
"""

import os as _os
import sys as _sys
from pathlib import Path as _Path

from monitor.model import _native

#: The compiled build in use (None: the source), and why (the Spark job logs it).
NATIVE, NATIVE_NOTE = _native.find(_Path(__file__).parent, _os.environ)
if NATIVE is not None:
    _sys.path.append(str(NATIVE / "lib"))  # mypyc's shared library, a top-level module
    __path__.insert(0, str(NATIVE / "model"))  # the compiled modules before the sources

# ruff: noqa: E402 -- the package's modules are imported once the build is chosen

from monitor.model.cluster import ClusterModel
from monitor.model.config import KAFKA_REPLICA_LAG_TIME_MAX_MS, ModelConfig
from monitor.model.events import (
    BrokerReport,
    ModelEvent,
    ModelRecord,
    PartitionMeta,
    PartitionRound,
    ReplicaReport,
    TopicConfigReport,
    TopicDeleted,
)
from monitor.model.findings import (
    EVENT_KINDS,
    NEEDS_REPLICA_SAMPLES,
    SEVERITY,
    STATE_ORDER,
    TRANSITION_KINDS,
    Finding,
    FindingKind,
    FindingState,
    Severity,
    finding_order,
    unavailable_kinds,
)
from monitor.model.partition import Context, new_state, step, tick
from monitor.model.rules import durability_profile, durability_risks
from monitor.model.state import EpochEntry, PartitionState, ReplicaState, TopicConfig

__all__ = [
    "EVENT_KINDS",
    "KAFKA_REPLICA_LAG_TIME_MAX_MS",
    "NATIVE",
    "NATIVE_NOTE",
    "NEEDS_REPLICA_SAMPLES",
    "SEVERITY",
    "STATE_ORDER",
    "TRANSITION_KINDS",
    "BrokerReport",
    "ClusterModel",
    "Context",
    "EpochEntry",
    "Finding",
    "FindingKind",
    "FindingState",
    "ModelConfig",
    "ModelEvent",
    "ModelRecord",
    "PartitionMeta",
    "PartitionRound",
    "PartitionState",
    "ReplicaReport",
    "ReplicaState",
    "Severity",
    "TopicConfig",
    "TopicConfigReport",
    "TopicDeleted",
    "durability_profile",
    "durability_risks",
    "finding_order",
    "new_state",
    "step",
    "tick",
    "unavailable_kinds",
]
