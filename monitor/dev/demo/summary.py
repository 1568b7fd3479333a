"""The end of the demo: the incident summary (detection delays, fault -> alert -> page
delays, the loss checked against a consumer reading the topic back, the findings in the
job's state store), ``summary.json``, ``findings.jsonl`` and the victim partition's
watermark diagram."""

from __future__ import annotations

import json
import time
from pathlib import Path

from monitor.contract.state import PartitionView
from monitor.dev.demo.incident import ALERT_FAULT, TOPIC
from monitor.dev.demo.live import LiveView
from monitor.dev.demo.verdict import held_ranges, loss_verdict
from monitor.dev.processes.prom import WebhookReceiver
from monitor.dev.processes.stream import StreamProcess
from monitor.model import FindingKind
from monitor.query.plot import plot_watermarks
from monitor.query.sources import SourceError, sample_of
from monitor.query.store import StoreSource

K = FindingKind


class Summary:
    """What the live view saw, the consumer's read-back and the job's state store, told."""

    def __init__(self, workdir: Path, view: LiveView, stream: StreamProcess | None) -> None:
        self.workdir = workdir
        self.view = view
        self.stream = stream
        self.say = view.say

    def report(
        self,
        lost_offsets: list[int],
        acked: set[int],
        hook: WebhookReceiver,
        lost_later: list[int],
    ) -> int:
        """Prints the summary, writes its files; 0 if the loss verdict passes.

        ``lost_offsets``: the victim partition's offsets whose record, acknowledged by the old
        leader (before the kill), is gone; ``acked``: every offset of it the old leader
        acknowledged; ``lost_later``: offsets whose record a later leader acknowledged and
        lost when leadership moved again before a follower had it (acks=1 above the HW:
        never committed -- seen once in CI, the failback's preferred election a moment after
        the new leader answered two appends). Shown, not part of the verdict."""
        view = self.view
        findings = [f for f in view.findings if f.topic == TOPIC]
        loss = [f for f in findings if f.kind == K.COMMITTED_DATA_LOSS]
        committed = sum(int(f.details["lost_count"]) for f in loss)
        consumer_lost = len(lost_offsets)
        # The consumer's lost offsets, split at what the monitor last saw of the old leader:
        # the held ranges are what the monitor reports as held and lost; offsets above were
        # acknowledged (acks=1) after its last sample, which no sampling monitor can see.
        ranges = held_ranges(loss)
        held = sum(hi - lo for lo, hi in ranges)
        seen = sum(1 for o in lost_offsets if any(lo <= o < hi for lo, hi in ranges))
        after = sum(1 for o in lost_offsets if all(o >= hi for _lo, hi in ranges))
        # Offsets of the ranges the old leader appended but never answered for (its answer
        # was in flight when it died): lost, but no acknowledged write among them.
        unacked = sum(1 for lo, hi in ranges for o in range(lo, hi) if o not in acked)
        # Pages reach the webhook after Alertmanager's group_wait: give them a moment.
        deadline = time.monotonic() + 30
        awaited = {"committed_data_loss", "unclean_election"}
        while not awaited <= hook.kinds() and time.monotonic() < deadline:
            time.sleep(0.5)
        # The delivery times the receiver stamped, whether or not the live view has shown them.
        for name, t in hook.first_received().items():
            view.page_first.setdefault(name, t)
        self.say("\n== incident summary")
        for ph in view.phases[1:]:
            for kind, t in sorted(ph.detected.items(), key=lambda kv: kv[1]):
                self.say(f"   {ph.name[:40]:<40} {kind:<20} detected +{t - ph.started:5.1f}s")
        alert_delays: dict[str, float] = {}
        page_delays: dict[str, float] = {}
        for name, t in sorted(view.alert_first_firing.items(), key=lambda kv: kv[1]):
            fault = ALERT_FAULT.get(name, "stall")
            base = view.fault_times.get(fault)
            if base is None or t < base:
                self.say(f"   alert {name:<22} firing (not caused by an injected fault)")
                continue
            alert_delays[name] = round(t - base, 1)
            paged = view.page_first.get(name)
            page = f", paged {paged - base:6.1f}s" if paged is not None else ""
            if paged is not None:
                page_delays[name] = round(paged - base, 1)
            self.say(f"   alert {name:<22} firing {t - base:6.1f}s{page} after the {fault}")
        self.say(f"   pages and tickets delivered by Alertmanager: {sorted(hook.kinds())}")
        self.say(f"   committed offsets lost (HW last observed vs new leader's log): {committed}")
        self.say(
            f"   acknowledged records lost (consumer read-back):                 {consumer_lost}"
        )
        self.say(f"   held by the old leader at its last sample, not by the new one:  {held}")
        self.say(
            f"   of the consumer's {consumer_lost}: {seen} in the range the monitor reported, "
            f"{after} acknowledged after its last sample of the old leader; "
            f"{unacked} offsets of the range were never acknowledged"
        )
        if lost_later:
            self.say(
                f"   acknowledged by a later leader and lost uncommitted when leadership moved "
                f"again (acks=1 above the HW; not committed data): {len(lost_later)} "
                f"(offsets {lost_later[0]}..{lost_later[-1]})"
            )
        plot = self.workdir / "explain-orders-0.png"
        self.plot(plot)
        (self.workdir / "findings.jsonl").write_text(
            "".join(json.dumps(f.to_dict()) + "\n" for f in view.findings)
        )
        self.say(f"   watermark diagram: {plot}")
        stored = self.stored_kinds()
        self.say(f"   findings in the job's state store: {sorted(stored)}")
        detected = {
            ph.name: {k: round(t - ph.started, 1) for k, t in ph.detected.items()}
            for ph in view.phases[1:]
        }
        verdict, ok = loss_verdict(loss, committed, held, seen, after, consumer_lost, unacked)
        (self.workdir / "summary.json").write_text(
            json.dumps(
                {
                    "detected_after_phase_start_s": detected,
                    "alert_firing_after_fault_s": alert_delays,
                    "page_delivered_after_fault_s": page_delays,
                    "alertmanager_received": sorted(hook.kinds()),
                    "committed_offsets_lost": committed,
                    "consumer_lost": consumer_lost,
                    "held_by_old_leader": held,
                    "consumer_lost_in_reported_range": seen,
                    "consumer_lost_after_last_sample": after,
                    "reported_range_never_acknowledged": unacked,
                    "consumer_lost_below_reported_range": consumer_lost - seen - after,
                    "lost_uncommitted_by_a_later_leader": len(lost_later),
                    "store_finding_kinds": sorted(stored),
                    # "consistent", or why not; and what each loss was judged on.
                    "loss_verdict": verdict.split(":")[0],
                    "loss_evidence": [str(f.details.get("leo_sampled")) for f in loss],
                },
                indent=2,
            )
            + "\n"
        )
        self.say(f"   verdict: {verdict}")
        return 0 if ok else 1

    # -- the job's state store -----------------------------------------------------------------

    def store(self) -> StoreSource | None:
        if self.stream is None or not self.stream.store.exists():
            return None
        try:
            return StoreSource(self.stream.store, cluster="lab")
        except SourceError:
            return None

    def victim_rows(self) -> list[PartitionView]:
        """The victim partition's rows in the job's state store, oldest first."""
        store = self.store()
        return store.views(TOPIC, 0) if store is not None else []

    def stored_kinds(self) -> set[str]:
        store = self.store()
        if store is None:
            return set()
        return {f.kind for f in store.reader.all_findings() if f.topic == TOPIC}

    def plot(self, path: Path) -> None:
        views = self.victim_rows()
        if not views:
            self.say("   (no state rows of the victim partition in the store: no diagram)")
            return
        samples = [sample_of(v, v.updated_at) for v in views if v.updated_at >= 0]
        mine = [f.to_dict() for f in self.view.findings if f.topic == TOPIC]
        plot_watermarks(views[-1], samples, mine, path)
