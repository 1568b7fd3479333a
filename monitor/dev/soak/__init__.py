"""``monitor soak``: the whole stack under steady load, lab faults and faults of the monitor.

Starts the demo's stack (a 3-broker lab, a one-broker monitor cluster for the monitor's own
topics, the collector, the Spark job with ``/metrics`` in its driver, Prometheus with the
shipped rules, Alertmanager with the shipped routes and a webhook pager) -- except that the
collector runs as a child process (``monitor collect``) so that it can really be killed --
and then loops cycles on two healthy topics under steady ``acks=all`` traffic -- ``soak``
(RF 3, ``min.insync.replicas=2``) and ``soak-move`` (RF 2, ``min.insync.replicas=1``, one
partition filled with 8 MB):

1. a **quiet window**: no finding may open and no Prometheus alert may fire;
2. a **lab fault**, rotating (``--lab-faults``): a broker leading no partition SIGSTOPped
   then SIGCONTed; one stopped and started; the soak topic's leader SIGKILLed and restarted
   (the controller elects an in-sync follower: a clean election); the soak topic deleted
   through the Admin API and recreated with the same name and assignment 3 s later
   (``recreate``); ``soak-move``'s follower moved to the third broker by a throttled
   reassignment (``reassign``, the leader stays);
3. once the lab fault is under way (its marker finding on every partition it hits), a
   **fault of the monitor itself**, rotating: SIGKILL of the Spark job in the middle of a
   micro-batch and a restart from its checkpoint; a crash and restart of the events topic's
   broker; SIGKILL of the collector and a restart; a restart of Prometheus on the same data;
4. recovery: the cluster heals, every finding the fault requires has arrived and every
   condition the monitor opened resolves.

Every finding on the findings topic is attributed to the window its event time falls in.
Per lab fault, the findings the fault must cause on each partition it hits (``REQUIRED``)
must each appear exactly once (one id; a condition's open and resolve once each), and
nothing else but the fault's ``COLLATERAL`` (a stalled broker's lag and silence; nothing
for the topic faults); nothing may appear in a quiet window; the findings topic is read
back raw at the end, and a finding id written twice (a replayed micro-batch after a
SIGKILL) must carry the same content both times. The monitor's
health (its ``/metrics``, ``kafka_replication_monitor_up``, the input lag, the collector's
rounds, Prometheus ``up`` and the monitor-health alerts) is sampled through each monitor
fault. The RSS of the Spark job's process group (driver, JVM, Python workers) and of the
collector is sampled all along; after a warm-up (the job's: a time; the collector's: the
first quiet window of its run) it must not grow by more than a tolerance.

``soak.json`` holds every cycle, the health and RSS series and the verdict; the exit code is
0 only if the verdict is ``pass``.

The parts, in the order of a run: ``cli`` (the command) makes a ``plan`` (settings, the
faults' rotation, what each lab fault must cause); ``runner`` (:class:`Soak`) starts the
``stack`` (the processes), the traffic and the ``sampling`` threads (health, RSS, alerts),
which write the ``record``; ``cycles`` inject the lab faults and ``monitor_faults`` the
faults of the monitor, waiting on ``health``; ``judge`` (with ``rss``) gives the verdict in
``soak.json`` and ``report`` prints it. ``probes`` holds the small helpers they share.
"""

from monitor.dev.soak.cli import register, run
from monitor.dev.soak.plan import (
    ASSIGNMENTS,
    CAUGHT_UP_AGE_S,
    COLLATERAL,
    COLLECTOR_DOWN_S,
    DELETED,
    HEALTH_ALERTS,
    LAB_FAULTS,
    MARKER,
    MONITOR_FAULTS,
    MOVE_ASSIGNMENTS,
    MOVE_TOPIC,
    REQUIRED,
    TOPIC,
    SoakPlan,
    expected,
)
from monitor.dev.soak.probes import read_raw, scrape, wait_until
from monitor.dev.soak.record import Cycle, MonitorFault, Window
from monitor.dev.soak.rss import group_rss
from monitor.dev.soak.runner import Soak
from monitor.dev.soak.stack import CollectorProcess

__all__ = [
    "ASSIGNMENTS",
    "CAUGHT_UP_AGE_S",
    "COLLATERAL",
    "COLLECTOR_DOWN_S",
    "DELETED",
    "HEALTH_ALERTS",
    "LAB_FAULTS",
    "MARKER",
    "MONITOR_FAULTS",
    "MOVE_ASSIGNMENTS",
    "MOVE_TOPIC",
    "REQUIRED",
    "TOPIC",
    "CollectorProcess",
    "Cycle",
    "MonitorFault",
    "Soak",
    "SoakPlan",
    "Window",
    "expected",
    "group_rss",
    "read_raw",
    "register",
    "run",
    "scrape",
    "wait_until",
]
