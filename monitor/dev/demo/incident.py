"""The scripted incident: on topic ``orders`` (RF 2, ``min.insync.replicas=2``) under steady
traffic,

1. a follower stalls -> the ISR shrinks -> under min ISR (an acks=all write is refused);
2. the follower returns;
3. the follower stops, the leader goes on alone, then the leader is killed while only the
   lagging replica survives -> offline -> a forced unclean election loses committed data;
4. recovery: the old leader returns, a preferred election gives it back its leadership.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from monitor.dev.demo.live import LiveView
from monitor.model import Finding, FindingKind

TOPIC = "orders"
K = FindingKind
#: Which injected fault each alert answers (for the fault -> firing delays).
ALERT_FAULT = {
    "offline": "kill",
    "unclean_election": "unclean",
    "committed_data_loss": "unclean",
    "truncation_below_hw": "unclean",  # the new leader's restart truncation, seen at election
    "leader_election": "kill",
}


def traffic(
    bootstrap: str,
    produce: Callable[..., object],
    acks: Path,
    stop: threading.Event,
    say: Callable[[str], None],
) -> None:
    """Steady acks=1 traffic, every acknowledged record logged for the final check."""
    reported: set[str] = set()
    while not stop.is_set():
        try:
            produce(
                bootstrap,
                TOPIC,
                rate=100,
                acks="1",
                duration_s=2.0,
                log_path=acks,
                stop=stop,
                delivery_timeout_s=15.0,
            )
        except Exception as e:  # offline for a while: keep trying, say it once
            if type(e).__name__ not in reported:
                reported.add(type(e).__name__)
                say(f"   (traffic: {type(e).__name__}: {str(e)[:100]}; retrying)")
            time.sleep(0.5)


class Incident:
    """Plays the script on a lab, each phase announced and awaited on the live view."""

    def __init__(self, view: LiveView, short: bool) -> None:
        self.view = view
        self.short = short
        self.say = view.say

    def play(self, lab: object, elect_leader: Callable[..., None]) -> None:
        from monitor.dev.lab.cluster import Lab

        assert isinstance(lab, Lab)
        view = self.view
        steady = 5 if self.short else 15

        def mine(kind: FindingKind, state: str | None = None) -> Callable[[Finding], bool]:
            return lambda f: (
                f.topic == TOPIC and f.kind == kind and (state is None or f.state == state)
            )

        view.phase(f"steady traffic ({steady}s): followers a few offsets behind, no findings")
        time.sleep(steady)

        view.phase("1. follower 2 stalls (SIGSTOP)")
        view.fault_times["stall"] = time.monotonic()
        lab.pause(2)
        view.wait_for("under_min_isr", mine(K.UNDER_MIN_ISR, "open"), 90)
        self.probe_acks_all(lab.bootstrap_servers)
        # The page: Prometheus fires under_min_isr once it has held for the rule's `for`,
        # Alertmanager delivers it to the pager after the route's group_wait.
        deadline = time.monotonic() + 150
        while "under_min_isr" not in view.page_first:
            if time.monotonic() > deadline:
                raise TimeoutError("under_min_isr did not reach the pager within 150s")
            time.sleep(1)

        view.phase("2. follower 2 returns (SIGCONT)")
        lab.resume(2)
        view.wait_for("under_min_isr resolved", mine(K.UNDER_MIN_ISR, "resolved"), 120)

        view.phase(
            "3. on-call lowers min.insync.replicas to 1 to keep writes flowing; "
            "follower 2 stops; leader 1 commits alone"
        )
        # With min ISR 2, Kafka 4.x (KIP-966) would not advance the HW under min ISR and
        # would keep broker 2 eligible: the election below would be clean. Lowering min
        # ISR is what makes the leader's lone writes *committed* -- and losable.
        set_min_isr(lab.bootstrap_servers, 1)
        lab.stop(2)
        view.wait_for("isr shrink", mine(K.ISR_SHRINK), 60)
        time.sleep(4 if self.short else 10)  # committed records the follower never gets
        view.fault_times["kill"] = time.monotonic()
        lab.kill(1)
        lab.start(2)  # two of three KRaft voters again: the controller can act
        view.wait_for("offline", mine(K.OFFLINE, "open"), 90)
        time.sleep(3)  # let the collector sample broker 2's LEO
        self.say("   forcing an unclean election of broker 2 (Admin ElectLeaders UNCLEAN)")
        view.fault_times["unclean"] = time.monotonic()
        elect_leader(lab.bootstrap_servers, TOPIC, 0, unclean=True)
        view.wait_for("unclean_election", mine(K.UNCLEAN_ELECTION), 60)
        view.wait_for("committed_data_loss", mine(K.COMMITTED_DATA_LOSS), 30)

        view.phase("4. recovery: broker 1 returns, preferred leader election")
        lab.start(1)
        view.wait_for("ISR back to [1, 2]", mine(K.UNDER_REPLICATED, "resolved"), 120)
        elect_leader(lab.bootstrap_servers, TOPIC, 0, unclean=False)
        view.wait_for(
            "leader 1 again",
            lambda f: mine(K.LEADER_ELECTION)(f) and f.details.get("leader") == 1,
            60,
        )
        time.sleep(4)  # let Prometheus evaluate the last alerts

    def probe_acks_all(self, bootstrap: str) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            retries=0,
            request_timeout_ms=5000,
            delivery_timeout_ms=6000,
        )
        try:
            producer.send(TOPIC, b"probe").get(timeout=10)
            self.say("   an acks=all write was accepted (!)")
        except Exception as e:
            self.say(f"   an acks=all write is refused, as it must be: {type(e).__name__}")
        finally:
            producer.close(timeout=5)


def set_min_isr(bootstrap: str, value: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, TOPIC, {"min.insync.replicas": str(value)})]
        )
    finally:
        admin.close()
