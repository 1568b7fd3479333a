"""``monitor demo``: a real cluster loses data, and the monitor says exactly what happened.

Starts the lab (3 KRaft brokers from Maven jars) and, beside it, a one-broker "monitor
cluster" for the monitor's own topics (a monitor whose telemetry rides on the cluster it
watches goes blind during the very outage it must report); the collector publishing events
there; the Spark job (``monitor stream``, its own process) with the Prometheus exporter in its
driver; Prometheus with the shipped rules and Alertmanager with the shipped routes. Then it
plays a scripted incident on a topic under steady traffic:

1. a follower stalls -> the ISR shrinks -> under min ISR (an acks=all write is refused);
2. the follower returns;
3. the follower stops, the leader goes on alone, then the leader is killed while only the
   lagging replica survives -> offline -> a forced unclean election loses committed data;
4. recovery: the old leader returns, a preferred election gives it back its leadership.

A live log shows findings (read from the job's findings topic) and Prometheus alerts as they
change; the end prints an incident summary (detection delays, committed offsets lost,
confirmed by a consumer reading the topic back), writes ``summary.json`` and draws the victim
partition's watermark diagram from the job's state store. Every process it started is
stopped at the end or on Ctrl-C.

The parts, in the order of a run: ``cli`` (the command), ``runner`` (:class:`Demo`: the
stack started and stopped), ``monitor_stack`` (the monitor's cluster, topics and job
settings, shared with the soak), ``incident`` (the script and its traffic), ``live`` (the
live view), ``summary`` and ``verdict`` (the end).
"""

from monitor.dev.demo.cli import register, run
from monitor.dev.demo.incident import ALERT_FAULT, TOPIC
from monitor.dev.demo.live import Phase
from monitor.dev.demo.monitor_stack import (
    DEADLETTER,
    EVENTS,
    FINDINGS,
    ONE_BROKER,
    STREAM_ARGS,
    STREAM_ENV,
    create_monitor_topics,
    monitor_cluster,
)
from monitor.dev.demo.runner import Demo
from monitor.dev.demo.verdict import loss_verdict

__all__ = [
    "ALERT_FAULT",
    "DEADLETTER",
    "EVENTS",
    "FINDINGS",
    "ONE_BROKER",
    "STREAM_ARGS",
    "STREAM_ENV",
    "TOPIC",
    "Demo",
    "Phase",
    "create_monitor_topics",
    "loss_verdict",
    "monitor_cluster",
    "register",
    "run",
]
