"""The runbook commands on the state store the real Spark job left after a real lab incident.

One incident for the module: the real collector records the lab while a lagging follower
is elected uncleanly (RF 2, min ISR 1: 300 acknowledged offsets written while it was away
are lost; a consumer confirms the count); its events go to a Kafka events topic exactly
as the collector serialises them, the Spark job (``streaming.job.start``, local session)
reads them and writes the Parquet store, and then every runbook command reads
``--store``. Beside the victim, a CP topic (RF 3, min ISR 2, led by the broker that never
fails) and a misconfigured one (RF 3, min ISR 1, unclean elections on) give ``what-if``
and ``audit`` something to say. The brokers are brought back after the incident.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from monitor.cli import main
from monitor.connection import KafkaConnection
from monitor.contract.events import PartitionEvent, dumps
from monitor.dev.lab.admin import create_topic, elect_leader
from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.load import produce, verify
from streaming.config import StreamingConfig
from streaming.job import start
from tests.collector.helpers import Recording
from tests.dev.lab.helpers import heal, topic_name
from tests.streaming.kafka_io import produce_events

pytestmark = [pytest.mark.spark, pytest.mark.lab]


@dataclass
class Incident:
    store: Path
    victim: str
    cp: str
    risky: str
    lost: int
    events: int
    window: tuple[int, int]  # ms: recording start and end


def _part(topic: str, pred: Any) -> Any:
    return lambda e: isinstance(e, PartitionEvent) and e.topic == topic and pred(e)


@pytest.fixture(scope="module")
def incident(
    spark: Any, kafka_lab: Lab, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Incident]:
    lab, tmp = kafka_lab, tmp_path_factory.mktemp("runbook-incident")
    boot = lab.bootstrap_servers
    victim, cp, risky = topic_name("rb-victim"), topic_name("rb-cp"), topic_name("rb-risky")
    acks = tmp / "acks.jsonl"
    create_topic(boot, victim, assignments={0: [1, 2]}, min_insync_replicas=1)
    create_topic(boot, cp, assignments={0: [3, 2, 1]}, min_insync_replicas=2)
    create_topic(
        boot,
        risky,
        assignments={0: [3, 1, 2]},
        min_insync_replicas=1,
        unclean_leader_election=True,
    )
    try:
        with Recording(lab) as rec:
            began = int(time.time() * 1000)
            rec.wait_rounds(1)
            produce(boot, victim, rate=400, count=200, acks="all", log_path=acks)
            rec.wait_for("HW 200", _part(victim, lambda e: (e.high_watermark or 0) >= 200))
            rec.wait_rounds(2)
            lab.stop(2)  # controlled shutdown: the follower's log stays at 200
            rec.wait_for("ISR [1]", _part(victim, lambda e: e.isr == [1]), timeout=90)
            produce(boot, victim, rate=400, count=300, acks="1", log_path=acks)
            rec.wait_for("HW 500", _part(victim, lambda e: (e.high_watermark or 0) >= 500))
            lab.kill(1)  # the leader crashes; 2 returns, lagging: offline
            lab.start(2)
            rec.wait_for("offline", _part(victim, lambda e: e.leader is None), timeout=90)
            rec.wait_rounds(2)
            elect_leader(boot, victim, 0, unclean=True)
            rec.wait_for("led by 2", _part(victim, lambda e: e.leader == 2))
            rec.wait_for("CP ISR {2, 3}", _part(cp, lambda e: sorted(e.isr) == [2, 3]), timeout=90)
            # Enough rounds after the election for the model to confirm the lower HW (a lone
            # lower sample is held as suspect): the history must end below 500.
            rec.wait_rounds(5)
            ended = int(time.time() * 1000)
            # The incident's own topics (and the brokers): the session lab holds the
            # topics of every test before, which the collector reads each round too.
            ours = {None, victim, cp, risky}
            events = [e for e in rec.events if getattr(e, "topic", None) in ours]
        report = verify(boot, victim, acks, settle_s=3)
        assert report.acknowledged == 500
        assert report.lost_count == 300, report.render()
    finally:
        heal(lab)

    # The collector's records, as it publishes them, through the real job into the store.
    tag = victim.rsplit("-", 1)[1]
    names = {r: f"rb-{r}-{tag}" for r in ("events", "findings", "deadletter")}
    for role, name in names.items():
        create_topic(boot, name, partitions=3 if role == "events" else 1, min_insync_replicas=2)
    produced = produce_events(boot, names["events"], [dumps(e).encode() for e in events])
    store = tmp / "store"
    cfg = StreamingConfig(
        kafka=KafkaConnection(bootstrap_servers=boot),
        events_topic=names["events"],
        findings_topic=names["findings"],
        deadletter_topic=names["deadletter"],
        checkpoint=str(tmp / "checkpoint"),
        store=str(store),
        trigger_seconds=0.5,
        tick_ms=3_600_000,
        buckets=4,
        jars=[],
        # a few dozen records a batch, as when the job runs while the collector writes:
        # the store's history (one row per touched partition per batch) then has the
        # incident's steps, not just its end
        max_offsets_per_trigger=40,
    )
    job = start(spark, cfg)
    try:
        job.drain(timeout_s=700)  # ~100 small batches: minutes on a loaded 2-core box
    finally:
        job.stop()
    assert job.counters.accepted == produced and job.counters.dead_lettered == 0
    yield Incident(store, victim, cp, risky, report.lost_count, produced, (began, ended))


def _run(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> str:
    got = main(list(argv))
    out, err = capsys.readouterr()
    assert got == code, err
    return out


def _json(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> Any:
    return json.loads(_run(capsys, *argv, "--json", code=code))


def test_status(incident: Incident, capsys: pytest.CaptureFixture[str]) -> None:
    """Broker 1 was killed and never came back while recorded: silent; the victim is
    under-replicated (ISR [2] of [1, 2]); the monitor's own freshness is the recording's.
    The loss is a one-off finding, no longer open, yet the check says CRITICAL (exit 2)."""
    store = str(incident.store)
    asked = time.time()
    st = _json(capsys, "status", "--store", store, "--stale-after", "1h", code=2)
    answered = time.time()
    assert st["status"] == "CRITICAL"
    in_window = {e["kind"]: e["count"] for e in st["events_in_window"]["by_kind"]}
    assert in_window["committed_data_loss"] == 1 and in_window["unclean_election"] == 1
    assert st["source"] == f"store {store}"
    assert st["partitions"] >= 3
    assert st["silent_brokers"] == [1]
    assert st["under_replicated"] >= 1
    # (every partition has replica samples: the lab's brokers all run an exporter)
    assert (st["without_replica_samples"], st["unavailable"]) == (0, [])
    assert st["open_by_kind"].get("under_replicated", 0) >= 1
    began, ended = incident.window
    fresh = st["freshness"]
    assert began <= fresh["newest_observed_at"] <= ended + 5_000
    # The job's heartbeat is the store's newest batch folder: its batch id, its mtime, and
    # the age status computed from that mtime while it ran (no bound on how old it may be).
    newest = max(
        (int(p.name.split("=", 1)[1]), p.stat().st_mtime)
        for sub in ("state", "findings")
        for p in (incident.store / sub).glob("batch_id=*")
    )
    assert (fresh["last_batch"], fresh["last_write_at"]) == newest
    age = fresh["last_write_age_s"]
    assert asked - newest[1] - 0.001 <= age <= answered - newest[1] + 0.001
    text = _run(capsys, "status", "--store", store, "--stale-after", "1h", code=2)
    assert text.startswith("CRITICAL - 1 committed_data_loss in the window")
    assert f"source:             store {store}" in text
    assert "silent brokers:     1" in text
    assert "newest telemetry:" in text and "last job batch:" in text


def test_partitions_with_a_finding(incident: Incident, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(incident.store)
    rows = _json(
        capsys, "partitions", "--finding", "under_replicated", "--topic", incident.victim,
        "--store", store,
    )  # fmt: skip
    assert [(r["topic"], r["partition"], r["leader"], r["isr"]) for r in rows] == [
        (incident.victim, 0, 2, [2])
    ]
    assert rows[0]["details"]["missing"] == [1]
    text = _run(
        capsys, "partitions", "--finding", "under_replicated", "--topic", incident.victim,
        "--store", store,
    )  # fmt: skip
    assert f"{incident.victim}/0" in text and "missing [1]" in text
    assert _json(capsys, "partitions", "--finding", "log_divergence", "--store", store) == []
    # a one-off kind: the loss, with its numbers, read from the store's findings
    rows = _json(capsys, "partitions", "--finding", "committed_data_loss", "--store", store)
    assert [(r["topic"], r["partition"], r["details"]["lost_count"]) for r in rows] == [
        (incident.victim, 0, incident.lost)
    ]


def test_explain_tells_the_loss_and_draws_it(
    incident: Incident, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store, victim = str(incident.store), incident.victim
    png = tmp_path / "victim.png"
    text = _run(capsys, "explain", victim, "0", "--store", store, "--plot", str(png))
    assert f"lost {incident.lost} committed offsets [200, 500)" in text
    assert f"Cost: {incident.lost} committed offsets lost." in text
    # Forced on a topic that forbids unclean elections: outside the ISR seen, unclean by
    # the loss its log shows (not by membership alone: monitor.model.rules).
    assert "forbids unclean elections" in text
    assert "unclean_election" in text and "UNCLEAN election: leader 2 was not in ISR" in text
    assert "and its log lacks committed offsets" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    d = _json(capsys, "explain", victim, "0", "--store", store)
    assert d["partition"]["leader"] == 2 and d["partition"]["isr"] == [2]
    loss = [f for f in d["findings"] if f["kind"] == "committed_data_loss"]
    assert [f["details"]["lost_count"] for f in loss] == [incident.lost]
    hws = [s["high_watermark"] for s in d["history"]]
    assert max(hws) >= 500 and hws[-1] < 500  # the HW went back: the loss, in the history
    # The offline spell: its finding, opened and resolved. The history has one row per
    # touched partition per batch, so a spell that began and ended inside one micro-batch
    # has no row of its own -- the lab's timing decides (it did so once, 2026-11-29).
    offline = {f["state"] for f in d["findings"] if f["kind"] == "offline"}
    assert offline == {"open", "resolved"}, offline
    # --since: only what happened in the window before the partition's newest sample
    short = _json(capsys, "explain", victim, "0", "--store", store, "--since", "1ms")
    cut = d["partition"]["updated_at"] - 1
    assert 1 <= len(short["history"]) < len(d["history"])
    assert all(s["at"] >= cut for s in short["history"])
    assert all(f["at"] >= cut for f in short["findings"]) and not any(
        f["kind"] == "committed_data_loss" for f in short["findings"]
    )
    assert main(["explain", victim, "7", "--store", store]) == 2
    err = capsys.readouterr().err
    assert f"unknown partition {victim}/7 in store {store}: topic {victim} has 1 partitions" in err


def test_lineage(incident: Incident, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(capsys, "lineage", incident.victim, "0", "--store", str(incident.store))
    assert rows[0]["leader"] == 1
    assert rows[-1]["leader"] == 2 and rows[-1]["start_offset"] == 200
    assert [r["epoch"] for r in rows] == sorted(r["epoch"] for r in rows)
    assert any(r["leader"] is None for r in rows[1:-1])  # offline between 1 and 2
    text = _run(capsys, "lineage", incident.victim, "0", "--store", str(incident.store))
    assert text.splitlines()[0].split() == ["EPOCH", "START", "OFFSET", "LEADER", "OBSERVED"]


def test_what_if(incident: Incident, capsys: pytest.CaptureFixture[str]) -> None:
    """Stopping broker 2 now: the victim (replicas [1, 2], ISR [2]) keeps no replica --
    broker 1 is dead, silent in the store, never a survivor (issue 50: it was counted as
    one, "an unclean election needed" from its last log end); the CP topic (ISR {2, 3} with
    broker 1 dead, min ISR 2) falls under min ISR."""
    rows = _json(capsys, "what-if", "--broker", "2", "--store", str(incident.store))
    by = {(r["topic"], r["partition"]): r for r in rows}
    assert by[(incident.victim, 0)]["outcome"] == "offline_no_replica"
    assert by[(incident.victim, 0)]["surviving_replicas"] == []
    assert by[(incident.cp, 0)]["outcome"] == "under_min_isr"
    assert by[(incident.cp, 0)]["surviving_isr"] == [3]
    order = [r["outcome"] for r in rows]
    assert order.index("offline_no_replica") < order.index("under_min_isr")
    text = _run(capsys, "what-if", "--broker", "2", "--store", str(incident.store))
    assert "if brokers [2] stopped now:" in text and "offline_no_replica" in text
    assert "brokers [1] are down already" in text


def test_audit(incident: Incident, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(incident.store)
    rows = _json(capsys, "audit", "--store", store)
    prof = {r["topic"]: (r["profile"], r["reasons"], r["replication_factor"]) for r in rows}
    assert prof[incident.victim] == ("AP", [], 2)
    assert prof[incident.cp] == ("CP", [], 3)
    assert prof[incident.risky] == (
        "misconfigured",
        ["min_isr_1_with_rf_3", "unclean_election_enabled"],
        3,
    )
    text = _run(capsys, "audit", "--topic", incident.risky, "--store", store)
    assert "unclean.leader.election.enable=false" in text
    assert main(["audit", "--topic", "nope", "--store", store]) == 2
    assert f"no configuration seen for topic nope in store {store}" in capsys.readouterr().err


def test_synthetic_store_has_the_jobs_schema(incident: Incident, tmp_path: Path) -> None:
    """The benchmark's synthetic store (pyarrow) has the columns and types Spark wrote."""
    import duckdb

    from bench._synthetic_store import write_store

    write_store(tmp_path / "synthetic", 1000, phases=4)

    def schema(root: Path, sub: str) -> list[tuple[str, str]]:
        rel = duckdb.sql(
            f"DESCRIBE SELECT * FROM read_parquet('{root}/{sub}/batch_id=*/*.parquet', "
            "hive_partitioning = true)"
        )
        return [(r[0], r[1]) for r in rel.fetchall()]

    for sub in ("state", "findings"):
        assert schema(tmp_path / "synthetic", sub) == schema(incident.store, sub), sub
