"""The soak's cycles, on the soak topic (RF 3) and ``soak-move`` (RF 2) under steady
``acks=all`` traffic:

1. a **quiet window**: no finding may open and no Prometheus alert may fire;
2. a **lab fault**, rotating: a broker leading no partition SIGSTOPped then SIGCONTed
   (``pause``); one stopped and started (``stop``); the soak topic's leader SIGKILLed and
   restarted (``leader_kill``: the controller elects an in-sync follower, a clean
   election); the soak topic deleted under traffic and recreated with the same name and
   assignment a few seconds later (``recreate``: a new topic id, epochs and offsets from
   0); ``soak-move``'s follower moved to the third broker by a throttled reassignment
   (``reassign``; the throttle is lifted once the monitor fault has struck);
3. once the lab fault's marker finding (:data:`~monitor.dev.soak.plan.MARKER`) is on every
   partition it hits, a **fault of the monitor itself**, rotating
   (:mod:`monitor.dev.soak.monitor_faults`);
4. recovery: the cluster heals and every finding the fault requires has arrived, every
   condition the monitor opened resolved.
"""

from __future__ import annotations

import threading
import time

from monitor.dev.soak.health import Health
from monitor.dev.soak.monitor_faults import MonitorFaults
from monitor.dev.soak.plan import (
    ASSIGNMENTS,
    DELETED,
    MARKER,
    MOVE_THROTTLE,
    MOVE_TOPIC,
    RECREATE_GAP_S,
    TOPIC,
    Layout,
    SoakPlan,
    expected,
    move_targets,
    subject,
    victim_of,
)
from monitor.dev.soak.probes import wait_until
from monitor.dev.soak.record import Cycle, Record, Window
from monitor.dev.soak.stack import Stack


def traffic(stack: Stack, stop: threading.Event, topic: str, rate: float) -> None:
    """Steady ``acks=all`` traffic on ``topic`` until ``stop``."""
    from monitor.dev.lab.load import produce

    while not stop.is_set():
        try:
            produce(
                stack.lab.bootstrap_servers,
                topic,
                rate=rate,
                acks="all",
                duration_s=10.0,
                stop=stop,
                delivery_timeout_s=20.0,
            )
        except Exception:  # a broker restarting, the topic recreated: go on
            stop.wait(0.5)


class Cycles:
    def __init__(
        self, plan: SoakPlan, record: Record, health: Health, faults: MonitorFaults
    ) -> None:
        self.plan = plan
        self.record = record
        self.health = health
        self.faults = faults
        self.lab = health.stack.lab
        self.say = record.say
        self.struck = threading.Event()  # the cycle's first monitor fault is injected
        self._next_quiet = 0.0

    def run(self) -> None:
        """As many cycles as the plan holds."""
        started = time.time()
        i = 0
        while self.plan.another_cycle(i, time.time() - started):
            lab_fault, monitor_faults = self.plan.faults_of(i)
            self.cycle(i, lab_fault, monitor_faults)
            i += 1

    def layout(self) -> Layout:
        """Leader and replicas of every partition of both topics."""
        from monitor.dev.lab.admin import describe_topic

        bootstrap = self.lab.bootstrap_servers
        return {
            subject(topic, s.partition): (s.leader, s.replicas)
            for topic in (TOPIC, MOVE_TOPIC)
            for s in describe_topic(bootstrap, topic)
        }

    def cycle(self, i: int, lab_fault: str, monitor_faults: list[str]) -> None:
        record = self.record
        began = time.time()
        quiet = Window("quiet", i, began)
        record.windows.append(quiet)
        quiet_s = max(self.plan.quiet_seconds, self._next_quiet)
        self.say(f"\n== cycle {i}: quiet window ({quiet_s:.0f}s)")
        time.sleep(quiet_s)
        quiet.end = time.time()
        layout = self.layout()
        victim = victim_of(lab_fault, i, layout, self.lab.node_ids)
        targets = move_targets(layout, self.lab.node_ids) if lab_fault == "reassign" else {}
        fault = Window("fault", i, time.time())
        record.windows.append(fault)
        cycle = Cycle(i, lab_fault, victim, quiet, fault, expected(lab_fault, victim, layout))
        record.cycles.append(cycle)
        self.say(
            f"== cycle {i}: {lab_fault}"
            + (f" of broker {victim}" if victim is not None else "")
            + f" (layout {dict(layout)}; hits {sorted(cycle.expected)})"
        )
        arrived = len(record.arrivals)
        self.struck.clear()
        recovery = threading.Thread(
            target=self.lab_fault, args=(lab_fault, victim, targets, cycle), daemon=True
        )
        recovery.start()
        try:
            # The monitor faults strike while the lab fault is in progress.
            if lab_fault == "recreate":
                self.wait_recreated(arrived, cycle)
            else:
                self.wait_for(arrived, *MARKER[lab_fault], 300, cycle)
            for name in monitor_faults:
                cycle.monitor_faults.append(self.faults.inject(name, self.struck))
        except TimeoutError as e:
            cycle.problems.append(str(e))
            self.say(f"   !! {e}")
        finally:
            self.struck.set()
        recovery.join()
        try:
            # Every finding the fault requires has arrived; every condition resolved.
            kinds = {k: t for e in cycle.expected.values() for k, t in e.items()}
            for kind, typ in kinds.items():
                state = "resolved" if typ == "condition" else None
                self.wait_for(arrived, kind, state, 900, cycle)
            self.health.settle(600)
            cycle.resolved_s = round(time.time() - fault.start, 1)
            time.sleep(6)  # Prometheus scrapes (2 s) and evaluates (2 s) the healed state
            cycle.healthy_s = round(self.health.healthy(900) + 6, 1)
        except TimeoutError as e:
            cycle.problems.append(str(e))
            self.say(f"   !! {e}")
        fault.end = time.time()
        # The next quiet window fills what is left of the cycle's period.
        self._next_quiet = self.plan.cycle_seconds - (fault.end - fault.start)
        self.say(
            f"   cycle {i}: healed {cycle.resolved_s}s after the fault; "
            f"detected {cycle.detection_s}"
        )

    def wait_for(self, since: int, kind: str, state: str | None, timeout: float, c: Cycle) -> None:
        """Wait until every partition the fault must give a ``kind`` finding has one (in
        ``state``)."""
        want = {s for s, kinds in c.expected.items() if kind in kinds}

        def seen() -> bool:
            return self.record.arrived(since, kind, state).keys() >= want

        wait_until(seen, timeout, f"{kind} {state or ''} on {sorted(want)}")
        # Detected when it had arrived for every partition.
        last = max(t for s, t in self.record.arrived(since, kind, state).items() if s in want)
        key = f"{kind} resolved" if state == "resolved" else kind
        c.detection_s.setdefault(key, round(last - c.fault.start, 1))

    def wait_recreated(self, since: int, c: Cycle) -> None:
        """``recreate``'s marker: the model reports the recreation on every partition
        (``topic_recreated``); when the collector saw the topic gone, the deletion
        (``topic_deleted``) came first, and the cycle requires it too (:data:`DELETED`)."""
        deleted = subject(TOPIC, None)
        partitions = set(c.expected)

        def reported() -> bool:
            if deleted in self.record.arrived(since, "topic_deleted", None):
                c.expected |= {k: dict(v) for k, v in DELETED.items()}
            return self.record.arrived(since, "topic_recreated", None).keys() >= partitions

        wait_until(reported, 300, "topic_recreated on every partition")
        for kind in {k for kinds in c.expected.values() for k in kinds}:
            self.wait_for(since, kind, None, 0, c)  # when it arrived

    def hold(self, started: float) -> None:
        """The lab fault lasts ``fault_seconds``, and at least until the first monitor fault
        has struck: the cluster heals while the monitor is down or restarting."""
        time.sleep(max(0.0, started + self.plan.fault_seconds - time.time()))
        self.struck.wait()

    def lab_fault(
        self, name: str, victim: int | None, targets: dict[int, list[int]], cycle: Cycle
    ) -> None:
        from monitor.dev.lab import admin

        lab = self.lab
        bootstrap = lab.bootstrap_servers
        started = time.time()
        try:
            if name == "recreate":
                admin.delete_topic(bootstrap, TOPIC)
                time.sleep(RECREATE_GAP_S)
                admin.create_topic(bootstrap, TOPIC, assignments=ASSIGNMENTS, min_insync_replicas=2)
            elif name == "reassign":
                self.say(f"   reassigning {MOVE_TOPIC}: {targets} (throttled)")
                try:
                    admin.reassign(
                        bootstrap, MOVE_TOPIC, targets, throttle_bytes_per_s=MOVE_THROTTLE
                    )
                    self.hold(started)
                finally:
                    admin.unthrottle(bootstrap, MOVE_TOPIC)
                admin.wait_for_partitions(
                    bootstrap,
                    MOVE_TOPIC,
                    lambda ps: all(sorted(p.replicas) == sorted(targets[p.partition]) for p in ps),
                    timeout_s=300,
                    what=f"moved to {targets}",
                )
            else:
                assert victim is not None
                if name == "pause":
                    lab.pause(victim)
                    self.hold(started)
                    lab.resume(victim)
                elif name == "stop":
                    lab.stop(victim)
                    self.hold(started)
                    lab.start(victim)
                else:
                    lab.kill(victim)
                    for topic in (TOPIC, MOVE_TOPIC):
                        admin.wait_for_partitions(
                            bootstrap,
                            topic,
                            lambda ps: all(p.leader not in (-1, victim) for p in ps),
                            timeout_s=60,
                            what="a new leader",
                        )
                    self.hold(started)
                    lab.start(victim)
            for topic in (TOPIC, MOVE_TOPIC):
                admin.wait_for_partitions(
                    bootstrap,
                    topic,
                    lambda ps: bool(ps) and all(set(p.isr) == set(p.replicas) for p in ps),
                    timeout_s=180,
                    what="full ISR again",
                )
        except Exception as e:
            cycle.problems.append(f"lab fault {name}: {e!r}")
            self.say(f"   !! lab fault {name}: {e!r}")
