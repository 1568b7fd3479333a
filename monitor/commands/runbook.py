"""The on-call runbook's commands: status, partitions, explain, lineage, what-if, audit.

Each reads a :mod:`state source <monitor.query.sources>`: ``--store DIR`` (the Spark job's
Parquet state store, queried with DuckDB; default ``$MONITOR_STORE``) or ``--events FILE``
(the model replayed over a captured events file), and prints a table for people or
``--json`` for scripts. Errors (missing or empty store, unknown partition, unreachable
Prometheus) exit with code 2 and a message naming the path or URL and the problem.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from monitor.contract.state import OpenFinding, PartitionView
from monitor.model import (
    EVENT_KINDS,
    NEEDS_REPLICA_SAMPLES,
    TRANSITION_KINDS,
    Finding,
    FindingKind,
    FindingState,
    unavailable_kinds,
)
from monitor.query.questions import Outcome, Status, audit, what_if
from monitor.query.render import iso, summary, table
from monitor.query.sources import ReplaySource, SourceError, StateSource

_COLOURS = {"critical": "31;1", "warning": "33", "info": "36"}


def _colour(text: str, severity: str) -> str:
    if not sys.stdout.isatty() or os.environ.get("NO_COLOR"):
        return text
    return f"\x1b[{_COLOURS.get(severity, '0')}m{text}\x1b[0m"


def _source(args: argparse.Namespace) -> StateSource:
    if args.events is not None:
        return ReplaySource(Path(args.events), cluster=args.cluster)
    store = args.store or os.environ.get("MONITOR_STORE")
    if not store:
        raise SourceError(
            "no state to read: give --store DIR (the streaming job's state store, or set "
            "MONITOR_STORE) or --events FILE (a captured events file)"
        )
    from monitor.query.store import StoreSource

    return StoreSource(store, cluster=args.cluster)


def _add_source(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--store",
        metavar="DIR",
        help="the streaming job's Parquet state store (default: $MONITOR_STORE)",
    )
    src.add_argument("--events", metavar="FILE", help="replay this JSON-lines events file")
    p.add_argument("--cluster", help="only this cluster")
    p.add_argument("--json", action="store_true", help="machine-readable output")


_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_ms(text: str) -> int:
    """``90s``, ``15m``, ``1h``, ``2d`` (or plain seconds) in milliseconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30m, 1h, 2d)")
    return int(float(m.group(1)) * _UNITS[m.group(2) or "s"])


def _as_finding(v: PartitionView, o: OpenFinding) -> Finding:
    """A partition's open condition as the finding that opened it, with today's details."""
    return Finding(
        FindingKind(o.kind), FindingState.OPEN, o.severity, v.cluster, v.topic, v.partition,
        o.opened_at, o.opened_at, o.broker, o.details,
    )  # fmt: skip


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    def add(
        name: str, help_text: str, fn: Callable[[argparse.Namespace], int]
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        _add_source(p)
        p.set_defaults(func=_guarded(fn))
        return p

    p = add(
        "status",
        "the cluster at a glance: open findings, recent data events, offline / under-min-ISR "
        "partitions, silent brokers, freshness; exits 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN "
        "(a monitoring-plugin check)",
        run_status,
    )
    p.add_argument(
        "--window",
        type=duration_ms,
        default=24 * 3_600_000,
        metavar="DURATION",
        help="one-off findings (a loss, an unclean election) count for this long before the "
        "newest telemetry (default 24h)",
    )
    p.add_argument(
        "--stale-after",
        type=duration_ms,
        default=600_000,
        metavar="DURATION",
        help="a store whose job last wrote longer ago than this is STALE: UNKNOWN (default 10m)",
    )
    p.add_argument(
        "--prometheus",
        metavar="URL",
        default=os.environ.get("MONITOR_PROMETHEUS"),
        help="also list the alerts firing in this Prometheus (default: $MONITOR_PROMETHEUS)",
    )
    p = add(
        "partitions",
        "the partitions with an open finding of a kind (a condition), or with a finding of a "
        "one-off kind (a loss, an election...) in the last --since, with their numbers",
        run_partitions,
    )
    p.add_argument("--finding", required=True, choices=[str(k) for k in FindingKind])
    p.add_argument("--topic")
    p.add_argument("--broker", type=int)
    p.add_argument(
        "--since",
        type=duration_ms,
        default=24 * 3_600_000,
        metavar="DURATION",
        help="one-off kinds: how far back before the newest telemetry (default 24h)",
    )
    p = add(
        "explain", "a partition's story: epochs, ISR changes, watermarks, findings", run_explain
    )
    p.add_argument("topic")
    p.add_argument("partition", type=int)
    p.add_argument("--plot", metavar="FILE.png", help="draw the watermark diagram")
    p.add_argument(
        "--since",
        type=duration_ms,
        metavar="DURATION",
        help="only the last DURATION before the partition's newest sample (30m, 1h, 2d)",
    )
    p = add(
        "lineage", "the observed leader-epoch history (epoch, start offset, leader)", run_lineage
    )
    p.add_argument("topic")
    p.add_argument("partition", type=int)
    p = add("what-if", "the blast radius if these brokers stopped now", run_what_if)
    p.add_argument("--broker", type=int, action="append", required=True)
    p.add_argument(
        "--limit",
        type=int,
        default=50,
        help="table rows to print, worst first (default 50; --json lists all)",
    )
    p = add(
        "audit", "each topic's durability profile (CP / AP / misconfigured) and fixes", run_audit
    )
    p.add_argument("--topic")


def _guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except SourceError as e:
            print(f"monitor {args.command}: {e}", file=sys.stderr)
            # status is a check: what it cannot read, it cannot vouch for (UNKNOWN).
            return UNKNOWN if args.command == "status" else 2

    return run


def _emit_json(obj: Any) -> int:
    print(json.dumps(obj, indent=2, default=str))
    return 0


# -- status -------------------------------------------------------------------------------


#: The monitoring-plugin exit codes of ``monitor status`` (Nagios, Icinga, Sensu...).
OK, WARNING, CRITICAL, UNKNOWN = 0, 1, 2, 3
CODE_NAMES = {OK: "OK", WARNING: "WARNING", CRITICAL: "CRITICAL", UNKNOWN: "UNKNOWN"}


def check_status(
    st: Status,
    recent: Counter[tuple[str, str]],
    partitions: int,
    stale: str | None,
    firing: Counter[str] | None = None,
) -> tuple[int, str]:
    """The check's verdict: (exit code, one line saying why).

    UNKNOWN when there is nothing to judge (no partition) or the source is stale; CRITICAL
    on an open critical condition, a critical one-off finding within the window (a loss
    stays CRITICAL for the window, not only the moment it happened) or a critical alert
    firing in Prometheus (``firing``, by severity, with ``--prometheus``); WARNING likewise.

    >>> from collections import Counter
    >>> check_status(Status(partitions=3), Counter({("committed_data_loss", "critical"): 1}),
    ...              3, None)
    (2, 'CRITICAL - 1 committed_data_loss in the window')
    """
    if partitions == 0:
        return UNKNOWN, "UNKNOWN - no partition telemetry"
    if stale is not None:
        return UNKNOWN, f"UNKNOWN - {stale}"
    parts = []
    for sev, code in (("critical", CRITICAL), ("warning", WARNING)):
        events = sorted((k, n) for (k, s_), n in recent.items() if s_ == sev)
        open_n = st.open_by_severity.get(sev, 0)
        alerts_n = (firing or Counter())[sev]
        if events or open_n or alerts_n:
            what = [f"{n} {k} in the window" for k, n in events]
            if open_n:
                what.append(f"{open_n} open {sev}")
            if alerts_n:
                what.append(f"{alerts_n} {sev} alert{'s' if alerts_n > 1 else ''} firing")
            parts.append((code, ", ".join(what)))
    if not parts:
        return OK, f"OK - {partitions} partitions, nothing open, nothing in the window"
    code = max(c for c, _ in parts)
    return code, f"{CODE_NAMES[code]} - " + "; ".join(w for _, w in parts)


def replica_samples_line(st: Status) -> str:
    """What the missing replica samples cost, for ``monitor status``.

    >>> replica_samples_line(Status(partitions=4, without_replica_samples=4))  # doctest: +ELLIPSIS
    'none (Admin API only): follower_lag, hw_lag, log_divergence, ... unavailable'
    >>> replica_samples_line(Status(partitions=4, without_replica_samples=1))  # doctest: +ELLIPSIS
    '1 of 4 partitions without (brokers without an exporter): follower_lag, ... not judged there'
    """
    unavailable = unavailable_kinds(st.partitions, st.without_replica_samples)
    if unavailable:
        return f"none (Admin API only): {', '.join(unavailable)} unavailable"
    return (
        f"{st.without_replica_samples} of {st.partitions} partitions without (brokers without "
        f"an exporter): {', '.join(sorted(NEEDS_REPLICA_SAMPLES))} not judged there"
    )


def run_status(args: argparse.Namespace) -> int:
    src = _source(args)
    st = src.summary()
    fresh = src.freshness()
    now = time.time()
    alerts = None
    if args.prometheus:
        from monitor.query.sources import prometheus_alerts

        alerts = prometheus_alerts(args.prometheus, args.cluster)
    telemetry_age = now - fresh.newest_observed_at / 1000 if fresh.newest_observed_at >= 0 else None
    write_age = now - fresh.last_write_at if fresh.last_write_at is not None else None
    # The window ends at the newest telemetry: a captured file's incident is as recent as
    # its own end, a live store's as the job's last batch.
    since = fresh.newest_observed_at - args.window if fresh.newest_observed_at >= 0 else 0
    recent = Counter(
        (d["kind"], d["severity"])
        for d in src.events(since)
        if FindingKind(d["kind"]) not in TRANSITION_KINDS  # judged by the ISR's conditions
    )
    stale, stale_s = None, args.stale_after / 1000
    if write_age is not None and write_age > stale_s:
        stale = f"the job last wrote {_ago(write_age)} ({src.label})"
    firing = None
    if alerts is not None:
        firing = Counter(a["labels"].get("severity", "") for a in alerts)
    code, line = check_status(st, recent, st.partitions, stale, firing)
    if args.json:
        # (not asdict: it rebuilds Counters from (key, value) pairs, counting the pairs)
        out: dict[str, Any] = {
            "status": CODE_NAMES[code],
            "exit_code": code,
            "summary": line,
            "source": src.label,
            "partitions": st.partitions,
            "open_by_severity": dict(st.open_by_severity),
            "open_by_kind": dict(st.open_by_kind),
            "events_in_window": {
                "since": since,
                "by_kind": [
                    {"kind": k, "severity": sev, "count": n}
                    for (k, sev), n in sorted(recent.items())
                ],
            },
            "offline": st.offline,
            "under_min_isr": st.under_min_isr,
            "under_replicated": st.under_replicated,
            "silent_brokers": st.silent_brokers,
            "without_replica_samples": st.without_replica_samples,
            "unavailable": [
                str(k) for k in unavailable_kinds(st.partitions, st.without_replica_samples)
            ],
            "newest_observed_at": st.newest_observed_at,
            "freshness": {
                "newest_observed_at": fresh.newest_observed_at,
                "telemetry_age_s": None if telemetry_age is None else round(telemetry_age, 3),
                "last_batch": fresh.last_batch,
                "last_write_at": fresh.last_write_at,
                "last_write_age_s": None if write_age is None else round(write_age, 3),
            },
        }
        if alerts is not None:
            out["prometheus"] = {"url": args.prometheus, "firing": alerts}
        _emit_json(out)
        return code
    print(_colour(line, {CRITICAL: "critical", WARNING: "warning"}.get(code, "")))
    print(f"source:             {src.label}")
    print(f"partitions tracked: {st.partitions}")
    sev = ", ".join(
        _colour(f"{st.open_by_severity[s]} {s}", s) for s in ("critical", "warning", "info")
    )
    print(f"open findings:      {sev}")
    window_events = ", ".join(
        _colour(f"{n} {k}", sev_) for (k, sev_), n in sorted(recent.items()) if sev_ != "info"
    )
    print(f"in the window:      {window_events or 'no warning or critical event'}")
    print(f"offline:            {st.offline}")
    print(f"under min ISR:      {st.under_min_isr}")
    print(f"under-replicated:   {st.under_replicated}")
    print(f"silent brokers:     {', '.join(map(str, st.silent_brokers)) or 'none'}")
    if st.without_replica_samples:
        print(f"replica samples:    {replica_samples_line(st)}")
    if telemetry_age is not None:
        # (a captured file is a snapshot: only a store, which a job should keep writing,
        # goes stale)
        age = _ago(telemetry_age, stale_s if write_age is not None else None)
        print(f"newest telemetry:   {iso(fresh.newest_observed_at)} ({age})")
    if write_age is not None:
        print(f"last job batch:     {fresh.last_batch} written {_ago(write_age, stale_s)}")
    if st.open_by_kind:
        print()
        rows = [[k, str(n)] for k, n in st.open_by_kind.most_common()]
        print(table(rows, ["OPEN KIND", "CONDITIONS"]))
    if alerts is not None:
        print()
        if not alerts:
            print(f"Prometheus {args.prometheus}: no alert firing")
        else:
            print(f"Prometheus {args.prometheus}: {len(alerts)} alerts firing")
            print(
                table(
                    [
                        [
                            _colour(
                                a["labels"].get("alertname", "?"), a["labels"].get("severity", "")
                            ),
                            a["labels"].get("severity", ""),
                            _subject(a["labels"]),
                            str(a.get("activeAt", ""))[:19],
                        ]
                        for a in alerts
                    ],
                    ["ALERT", "SEVERITY", "SUBJECT", "ACTIVE SINCE"],
                )
            )
    return code


def _ago(seconds: float, stale_s: float | None = None) -> str:
    """``42s ago``, ``12 min ago``, ``3.0 h ago``; ``: STALE`` past ``stale_s``."""
    if seconds < 0:
        return f"{-seconds:.0f}s in the future: clocks disagree"
    if seconds < 120:
        text = f"{seconds:.0f}s ago"
    elif seconds < 7200:
        text = f"{seconds / 60:.0f} min ago"
    else:
        text = f"{seconds / 3600:.1f} h ago"
    return text + (": STALE" if stale_s is not None and seconds > stale_s else "")


def _subject(labels: dict[str, str]) -> str:
    parts = [labels["cluster"]] if "cluster" in labels else []
    if "topic" in labels:
        parts.append(labels["topic"] + (f"/{labels['partition']}" if "partition" in labels else ""))
    if "broker" in labels:
        parts.append(f"broker {labels['broker']}")
    return " ".join(parts) or "-"


# -- partitions ----------------------------------------------------------------------------


def run_partitions(args: argparse.Namespace) -> int:
    src = _source(args)
    rows: list[dict[str, Any]] = []
    if FindingKind(args.finding) in EVENT_KINDS:
        # A one-off kind: the partitions that had one in the window, each with the
        # finding's own numbers (a partition with two has two rows).
        newest = src.freshness().newest_observed_at
        since = newest - args.since if newest >= 0 else 0
        unnamed = 0  # cluster-level: the controllers' unclean-election counter names none
        for d in src.events(since, args.finding):
            if d.get("partition") is None:
                unnamed += 1
                continue
            if args.topic and d.get("topic") != args.topic:
                continue
            if args.broker is not None and args.broker != d.get("broker"):
                continue
            rows.append(
                {
                    "topic": d["topic"],
                    "partition": d["partition"],
                    "broker": d.get("broker"),
                    "at": d["at"],
                    "summary": summary(Finding.from_dict(d)),
                    "details": d["details"],
                }
            )
        code = _partition_rows(args, rows, f"no partition had a {args.finding} in the window")
        if unnamed and not args.json:
            print(
                f"and {unnamed} {args.finding} without a partition in the window (a "
                "controller's counter: see docs/runbook.md#unclean_election_counted)"
            )
        return code
    for v in src.with_open(args.finding, args.topic):
        for o in v.open_findings:
            if o.kind != args.finding:
                continue
            if args.broker is not None and args.broker not in (o.broker, v.leader):
                continue
            f = _as_finding(v, o)
            rows.append(
                {
                    "topic": v.topic,
                    "partition": v.partition,
                    "broker": o.broker,
                    "since": o.opened_at,
                    "leader": v.leader,
                    "isr": list(v.isr),
                    "hw": v.high_watermark,
                    "summary": summary(f),
                    "details": o.details,
                }
            )
    return _partition_rows(args, rows, f"no partition has an open {args.finding}")


def _partition_rows(args: argparse.Namespace, rows: list[dict[str, Any]], none: str) -> int:
    rows.sort(key=lambda r: (r["topic"], r["partition"], r.get("at", 0)))
    if args.json:
        return _emit_json(rows)
    if not rows:
        print(none)
        return 0
    if rows[0].get("at") is not None:  # one-off findings: when, and what they say
        print(
            table(
                [
                    [
                        f"{r['topic']}/{r['partition']}",
                        "" if r["broker"] is None else str(r["broker"]),
                        iso(r["at"]),
                        r["summary"],
                    ]
                    for r in rows
                ],
                ["PARTITION", "BROKER", "AT", "SUMMARY"],
            )
        )
        return 0
    print(
        table(
            [
                [
                    f"{r['topic']}/{r['partition']}",
                    "" if r["broker"] is None else str(r["broker"]),
                    iso(r["since"]),
                    "none" if r["leader"] is None else str(r["leader"]),
                    str(r["isr"]),
                    str(r["hw"]),
                    r["summary"],
                ]
                for r in rows
            ],
            ["PARTITION", "BROKER", "OPEN SINCE", "LEADER", "ISR", "HW", "SUMMARY"],
        )
    )
    return 0


# -- explain and lineage --------------------------------------------------------------------


def _lineage_rows(v: PartitionView) -> list[dict[str, Any]]:
    return [
        {
            "epoch": e.epoch,
            "start_offset": e.start_offset if e.start_offset >= 0 else None,
            "leader": e.leader,
            "at": e.at,
        }
        for e in v.lineage
    ]


def run_lineage(args: argparse.Namespace) -> int:
    src = _source(args)
    v = src.partition(args.topic, args.partition)
    rows = _lineage_rows(v)
    if args.json:
        return _emit_json(rows)
    print(
        table(
            [
                [
                    str(r["epoch"]),
                    "?" if r["start_offset"] is None else str(r["start_offset"]),
                    "none" if r["leader"] is None else str(r["leader"]),
                    iso(r["at"]),
                ]
                for r in rows
            ],
            ["EPOCH", "START OFFSET", "LEADER", "OBSERVED"],
        )
    )
    return 0


def story(v: PartitionView, findings: Sequence[dict[str, Any]]) -> list[str]:
    """The partition's story, one plain sentence per line."""
    lines = [
        f"{v.topic}/{v.partition} (cluster {v.cluster}): replicas {list(v.replicas)}, "
        f"min ISR {v.min_isr if v.min_isr is not None else '?'}; now "
        + (
            f"led by {v.leader} at epoch {v.leader_epoch}"
            if v.leader is not None
            else f"OFFLINE at epoch {v.leader_epoch}"
        )
        + f", ISR {list(v.isr)}, HW {v.high_watermark}."
    ]
    epochs = [
        f"{e.epoch} from offset {e.start_offset if e.start_offset >= 0 else '?'} led by "
        f"{'nobody' if e.leader is None else e.leader} ({iso(e.at)})"
        for e in v.lineage
    ]
    if epochs:
        lines.append("Epochs: " + "; ".join(epochs) + ".")
    leos = ", ".join(f"broker {r.broker} LEO {r.leo}" for r in v.replica_states if r.leo >= 0)
    if leos:
        lines.append(f"Replicas now: {leos}; uncommitted {v.uncommitted}.")
    for o in v.open_findings:  # with today's numbers (a reassignment's copy progress, a lag)
        now = _as_finding(v, o)
        who = f" (broker {o.broker})" if o.broker is not None else ""
        lines.append(f"Open now: {o.kind}{who} since {iso(o.opened_at)}: {summary(now)}")
    for d in findings:
        f = Finding.from_dict(d)
        if f.kind == FindingKind.STALE_TELEMETRY and f.topic is None:
            continue
        verb = {"open": "opened", "resolved": "resolved", "event": ""}[f.state.value]
        who = (
            f" (broker {f.broker})" if f.broker is not None and f.kind != "leader_election" else ""
        )
        lines.append(f"{iso(f.at)}  {f.kind}{who}{' ' + verb if verb else ''}: {summary(f)}")
    lost = sum(
        int(d["details"].get("lost_count", 0))
        for d in findings
        if d["kind"] == "committed_data_loss"
    )
    if lost:
        lines.append(f"Cost: {lost} committed offsets lost.")
    return lines


def run_explain(args: argparse.Namespace) -> int:
    src = _source(args)
    v = src.partition(args.topic, args.partition)
    since = max(0, v.updated_at - args.since) if args.since is not None else 0
    findings = src.findings(args.topic, args.partition, since)
    hist = src.history(args.topic, args.partition, since)
    if args.plot:
        from monitor.query.plot import plot_watermarks

        try:
            plot_watermarks(v, hist, findings, Path(args.plot))
        except ValueError as e:  # no history in the window
            raise SourceError(f"{e} in {src.label}") from None
    if args.json:
        return _emit_json(
            {
                "partition": v.to_row(details_as_text=False),
                "findings": findings,
                "history": [asdict(s) for s in hist],
            }
        )
    for line in story(v, findings):
        print(line)
    if args.plot:
        print(f"plot written to {args.plot}")
    return 0


# -- what-if and audit --------------------------------------------------------------------


def run_what_if(args: argparse.Namespace) -> int:
    src = _source(args)
    stopped = set(args.broker)
    down = sorted({b.broker for b in src.brokers() if not b.alive} - stopped)
    impacts = what_if(src.holding(stopped), stopped, down)
    if args.json:
        return _emit_json([asdict(i) for i in impacts])
    if not impacts:
        print(f"brokers {sorted(stopped)} hold no replica: nothing changes")
        return 0
    counts = {o: sum(1 for i in impacts if i.outcome is o and not i.already) for o in Outcome}
    print(f"if brokers {sorted(stopped)} stopped now:")
    if down:
        print(f"  (brokers {down} are down already -- not answering the collector: no survivors)")
    for o, n in counts.items():
        if n:
            print(f"  {n:6d}  {o.value}")
    at_stake = sum(i.committed_at_stake for i in impacts)
    unc = sum(i.uncommitted_at_stake for i in impacts)
    print(
        f"  committed offsets only an unclean election could restore (and would lose): {at_stake}"
    )
    print(f"  uncommitted offsets on stopped leaders: {unc}")
    print()
    shown = impacts[: max(0, args.limit)]
    print(
        table(
            [
                [
                    f"{i.topic}/{i.partition}",
                    i.outcome.value + (" (already)" if i.already else ""),
                    str(list(i.isr)),
                    str(list(i.surviving_isr)),
                    str(i.committed_at_stake),
                    str(i.uncommitted_at_stake),
                ]
                for i in shown
            ],
            [
                "PARTITION",
                "OUTCOME",
                "ISR",
                "ISR LEFT",
                "COMMITTED AT STAKE",
                "UNCOMMITTED AT STAKE",
            ],
        )
    )
    if len(impacts) > len(shown):
        print(f"... and {len(impacts) - len(shown)} more (--limit N, or --json for all)")
    return 0


def run_audit(args: argparse.Namespace) -> int:
    src = _source(args)
    configs = {
        t: c for (_cl, t), c in src.topic_configs().items() if args.topic is None or t == args.topic
    }
    if args.topic and not configs:
        raise SourceError(f"no configuration seen for topic {args.topic} in {src.label}")
    rows = audit(configs)
    if args.json:
        return _emit_json([asdict(r) for r in rows])
    print(
        table(
            [
                [
                    r.topic,
                    str(r.replication_factor),
                    str(r.min_insync_replicas),
                    str(r.unclean_leader_election_enable).lower(),
                    _colour(r.profile, "warning" if r.profile == "misconfigured" else "info"),
                    ", ".join(r.reasons) or "-",
                ]
                for r in rows
            ],
            ["TOPIC", "RF", "MIN ISR", "UNCLEAN", "PROFILE", "REASONS"],
        )
    )
    fixes = [(r.topic, f) for r in rows for f in r.fixes]
    if fixes:
        print("\nfixes:")
        for topic, fix in fixes:
            print(f"  {topic}: {fix}")
    return 0
