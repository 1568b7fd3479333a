"""The runbook's state source over the Spark job's Parquet state store (``--store DIR``).

The store (``streaming/store.py``: ``state/batch_id=<n>/``, ``findings/batch_id=<n>/``,
``snapshot/state.parquet``) is queried in-process with DuckDB. Each question is pushed down
as SQL so that only the rows an answer needs become Python objects: ``status`` is a few
aggregates, ``partitions --finding`` reads whole rows only where the finding is open,
``what-if`` reads six columns of the partitions on the stopped brokers, ``explain`` one
partition's rows. Rows become :class:`~monitor.contract.views.PartitionView` with the exporter's
``view_from_state_row``, so the CLI and /metrics read the same numbers.

Brokers: every broker that holds a replica, and every broker with a broker-level
``stale_telemetry`` finding (the job's way of saying a broker went silent, in the findings
store); a broker whose last such finding is open is silent.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from monitor.contract.views import PartitionView, ReplicaView
from monitor.exporter.driver import view_from_state_row
from monitor.exporter.snapshot import BrokerView
from monitor.model import TopicConfig
from monitor.query.questions import Status
from monitor.query.sources import Freshness, Sample, SourceError, _content

_SEVERITIES = ("info", "warning", "critical")


class StoreSource:
    """A :class:`~monitor.query.sources.StateSource` reading the job's state store."""

    def __init__(self, root: str | Path, cluster: str | None = None) -> None:
        from streaming.store import StoreError, StoreReader

        self.root = Path(root)
        self.cluster = cluster
        self.label = f"store {self.root}" + (f" (cluster {cluster})" if cluster else "")
        self._error = StoreError
        self._counts: dict[str, Any] | None = None
        try:
            self.reader = StoreReader(self.root, cluster)
        except StoreError as e:
            raise SourceError(str(e)) from None

    def _q(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._error as e:
            raise SourceError(str(e)) from None

    # -- partitions -----------------------------------------------------------------------

    def partitions(self) -> list[PartitionView]:
        return [view_from_state_row(r) for r in self._q(self.reader.current)]

    def partition(self, topic: str, partition: int) -> PartitionView:
        rows = self._q(self.reader.partition, topic, partition)
        if len(rows) > 1:
            clusters = ", ".join(sorted(str(r["cluster"]) for r in rows))
            raise SourceError(
                f"{topic}/{partition} exists in several clusters of {self.label} ({clusters}): "
                "give --cluster"
            )
        if rows:
            return view_from_state_row(rows[0])
        n, top = self._q(self.reader.topic_partitions, topic)
        if n:
            raise SourceError(
                f"unknown partition {topic}/{partition} in {self.label}: topic {topic} has "
                f"{n} partitions (0..{top})"
            )
        count, names = self._q(self.reader.topics)
        raise SourceError(
            f"unknown partition {topic}/{partition} in {self.label}: no topic {topic} "
            f"(topics known: {', '.join(names) or 'none'}"
            f"{f', ... {count} in all' if count > len(names) else ''})"
        )

    def with_open(self, kind: str, topic: str | None = None) -> list[PartitionView]:
        return [view_from_state_row(r) for r in self._q(self.reader.with_open, kind, topic)]

    def holding(self, brokers: set[int]) -> list[PartitionView]:
        """Lean views (no lineage, findings or lag): what ``queries.what_if`` reads."""
        out = []
        for (
            cluster,
            topic,
            number,
            leader,
            epoch,
            isr,
            replicas,
            min_isr,
            hw,
            max_hw,
            uncommitted,
            updated_at,
            brokers_,
            leos,
            opens,
        ) in self._q(self.reader.holding, sorted(brokers)):
            if min_isr is None and opens:
                min_isr = view_from_state_row(
                    {
                        "cluster": cluster,
                        "topic": topic,
                        "partition": number,
                        "open_findings": opens,
                    }
                ).min_isr
            out.append(
                PartitionView(
                    cluster=cluster,
                    topic=topic,
                    partition=number,
                    leader=leader if leader is not None and leader >= 0 else None,
                    leader_epoch=epoch or 0,
                    replicas=tuple(replicas or ()),
                    isr=tuple(isr or ()),
                    min_isr=min_isr,
                    hw=hw if hw is not None else -1,
                    max_hw=max_hw if max_hw is not None else -1,
                    uncommitted=uncommitted or 0,
                    hw_lag_ms=0,
                    replica_views=tuple(
                        ReplicaView(b, leo if leo is not None else -1, 0, 0, -1)
                        for b, leo in zip(brokers_ or (), leos or (), strict=True)
                    ),
                    open=(),
                    lineage=(),
                    last_seen=updated_at if updated_at is not None else -1,
                )
            )
        return out

    def _summary(self) -> dict[str, Any]:
        if self._counts is None:
            self._counts = self._q(self.reader.summary)
        return self._counts

    def summary(self) -> Status:
        s = self._summary()
        st = Status(
            partitions=int(s["partitions"]),
            offline=int(s["offline"]),
            under_min_isr=int(s["under_min_isr"]),
            under_replicated=int(s["under_replicated"]),
            newest_observed_at=int(s["newest_observed_at"]),
            silent_brokers=sorted(b.broker for b in self._silent()),
        )
        by_sev: Counter[str] = Counter()
        by_kind: Counter[str] = Counter()
        for kind, severity, n in s["open"]:
            by_sev[severity if severity in _SEVERITIES else "warning"] += n
            by_kind[kind] += n
        st.open_by_severity, st.open_by_kind = by_sev, by_kind
        return st

    def freshness(self) -> Freshness:
        newest = int(self._summary()["newest_observed_at"])
        last = self.reader.last_write()
        if last is None:
            return Freshness(newest)
        return Freshness(newest, last[0], last[1])

    # -- topics and brokers ---------------------------------------------------------------------

    def topic_configs(self, topic: str | None = None) -> dict[tuple[str, str], TopicConfig]:
        return {
            (r["cluster"], r["topic"]): TopicConfig(
                int(r["replication_factor"]), int(r["min_isr"]), bool(r["unclean_enabled"])
            )
            for r in self._q(self.reader.topic_configs, topic)
        }

    def _silent(self) -> list[BrokerView]:
        return [
            BrokerView(
                r["cluster"], int(r["broker"]), False, int(r["details"].get("last_seen_at", -1))
            )
            for r in self._q(self.reader.broker_conditions)
            if r["state"] == "open"
        ]

    def brokers(self) -> list[BrokerView]:
        silent = {(b.cluster, b.broker): b for b in self._silent()}
        out = dict(silent)
        for r in self._q(self.reader.replica_brokers):
            key = (r["cluster"], int(r["broker"]))
            if key not in out:
                out[key] = BrokerView(key[0], key[1], True, int(r["observed_at"] or -1))
        return [out[k] for k in sorted(out)]

    # -- one partition's past -----------------------------------------------------------------

    def history(self, topic: str, partition: int, since_ms: int = 0) -> list[Sample]:
        out: list[Sample] = []
        rows = self._q(self.reader.history, topic, partition, since_ms)
        for r in rows:
            if r["cluster"] != rows[0]["cluster"]:
                continue  # (several clusters: ``partition()`` asks for --cluster first)
            leader = r["leader"] if r["leader"] is not None and r["leader"] >= 0 else None
            s = Sample(
                int(r["updated_at"]),
                int(r["high_watermark"] if r["high_watermark"] is not None else -1),
                leader,
                int(r["leader_epoch"] or 0),
                tuple(r["isr"] or ()),
                tuple(
                    (int(x["broker"]), int(x["leo"]))
                    for x in (r["replica_states"] or ())
                    if x["leo"] is not None and x["leo"] >= 0
                ),
            )
            if not out or _content(out[-1]) != _content(s):
                out.append(s)
        return out

    def findings(self, topic: str, partition: int, since_ms: int = 0) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self._q(self.reader.findings, topic, partition, since_ms)
        return rows


def prometheus_alerts(url: str, timeout_s: float = 5.0) -> list[dict[str, Any]]:
    """Firing alerts from Prometheus' HTTP API (``GET /api/v1/alerts``).

    Raises :class:`SourceError` naming the URL when Prometheus cannot be reached or does not
    answer like Prometheus.
    """
    import urllib.error
    import urllib.request

    api = url.rstrip("/") + "/api/v1/alerts"
    try:
        with urllib.request.urlopen(api, timeout=timeout_s) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise SourceError(f"Prometheus at {url} answered {e.code} {e.reason} for {api}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise SourceError(f"cannot reach Prometheus at {url}: {reason}") from None
    except ValueError:
        raise SourceError(f"{api} did not answer JSON: is {url} a Prometheus?") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        raise SourceError(f"Prometheus at {url} answered {str(body)[:200]}")
    alerts = [a for a in body["data"]["alerts"] if a.get("state") == "firing"]
    alerts.sort(key=lambda a: (a["labels"].get("alertname", ""), sorted(a["labels"].items())))
    return alerts


def age_s(at_ms: int, now: float | None = None) -> float:
    """Seconds from ``at_ms`` to now."""
    return (time.time() if now is None else now) - at_ms / 1000
