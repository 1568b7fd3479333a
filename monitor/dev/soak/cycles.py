"""The soak's cycles, on the soak topic under steady ``acks=all`` traffic:

1. a **quiet window**: no finding may open and no Prometheus alert may fire;
2. a **lab fault**, rotating: a follower SIGSTOPped then SIGCONTed; a follower stopped and
   started; the leader SIGKILLed and restarted (the controller elects an in-sync follower:
   a clean election);
3. while the lab fault's conditions are open, a **fault of the monitor itself**, rotating
   (:mod:`monitor.dev.soak.monitor_faults`);
4. recovery: the cluster heals and every condition the monitor opened resolves.
"""

from __future__ import annotations

import threading
import time

from monitor.dev.soak.health import Health
from monitor.dev.soak.monitor_faults import MonitorFaults
from monitor.dev.soak.plan import ASSIGNMENTS, TOPIC, SoakPlan
from monitor.dev.soak.probes import wait_until
from monitor.dev.soak.record import Cycle, Record, Window
from monitor.dev.soak.stack import Stack


def traffic(stack: Stack, stop: threading.Event) -> None:
    """Steady ``acks=all`` traffic on the soak topic until ``stop``."""
    from monitor.dev.lab.load import produce

    while not stop.is_set():
        try:
            produce(
                stack.lab.bootstrap_servers,
                TOPIC,
                rate=50,
                acks="all",
                duration_s=10.0,
                stop=stop,
                delivery_timeout_s=20.0,
            )
        except Exception:  # a broker restarting under the producer: go on
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

    def cycle(self, i: int, lab_fault: str, monitor_faults: list[str]) -> None:
        from monitor.dev.lab.admin import describe_topic

        record, lab = self.record, self.lab
        began = time.time()
        quiet = Window("quiet", i, began)
        record.windows.append(quiet)
        quiet_s = max(self.plan.quiet_seconds, self._next_quiet)
        self.say(f"\n== cycle {i}: quiet window ({quiet_s:.0f}s)")
        time.sleep(quiet_s)
        quiet.end = time.time()
        states = describe_topic(lab.bootstrap_servers, TOPIC)
        leaders = {s.leader for s in states}
        if lab_fault == "leader_kill":
            victim = states[0].leader
        else:
            followers = [b for b in lab.node_ids if b not in leaders]
            victim = followers[i % len(followers)]
        fault = Window("fault", i, time.time())
        record.windows.append(fault)
        cycle = Cycle(i, lab_fault, victim, quiet, fault)
        record.cycles.append(cycle)
        self.say(f"== cycle {i}: {lab_fault} of broker {victim} (leaders {sorted(leaders)})")
        arrived = len(record.arrivals)
        self.struck.clear()
        recovery = threading.Thread(
            target=self.lab_fault, args=(lab_fault, victim, cycle), daemon=True
        )
        recovery.start()
        try:
            # The monitor faults strike while the lab fault's conditions are open.
            self.wait_kind(arrived, "under_replicated", "open", 300, cycle)
            for name in monitor_faults:
                cycle.monitor_faults.append(self.faults.inject(name, self.struck))
        except TimeoutError as e:
            cycle.problems.append(str(e))
            self.say(f"   !! {e}")
        finally:
            self.struck.set()
        recovery.join()
        try:
            self.wait_kind(arrived, "isr_expand", None, 900, cycle)
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

    def wait_kind(self, since: int, kind: str, state: str | None, timeout: float, c: Cycle) -> None:
        """Wait until every soak partition has a ``kind`` finding (in ``state``)."""

        def seen() -> bool:
            return self.record.partitions_with(since, kind, state) >= set(ASSIGNMENTS)

        wait_until(seen, timeout, f"{kind} {state or ''} on every partition")
        c.detection_s.setdefault(kind, round(time.time() - c.fault.start, 1))

    def hold(self, started: float) -> None:
        """The lab fault lasts ``fault_seconds``, and at least until the first monitor fault
        has struck: the cluster heals while the monitor is down or restarting."""
        time.sleep(max(0.0, started + self.plan.fault_seconds - time.time()))
        self.struck.wait()

    def lab_fault(self, name: str, victim: int, cycle: Cycle) -> None:
        from monitor.dev.lab.admin import wait_for_partitions

        lab = self.lab
        started = time.time()
        try:
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
                wait_for_partitions(
                    lab.bootstrap_servers,
                    TOPIC,
                    lambda ps: all(p.leader not in (-1, victim) for p in ps),
                    timeout_s=60,
                    what="a new leader",
                )
                self.hold(started)
                lab.start(victim)
            wait_for_partitions(
                lab.bootstrap_servers,
                TOPIC,
                lambda ps: all(set(p.isr) == set(p.replicas) for p in ps),
                timeout_s=180,
                what="full ISR again",
            )
        except Exception as e:
            cycle.problems.append(f"lab fault {name}: {e!r}")
            self.say(f"   !! lab fault {name}: {e!r}")
