"""Every runbook command on a synthetic 100k-partition state store: answers right.

The store (``bench/_synthetic_store.py``: state rows of real model states, written with
pyarrow in the job's layout, first batches compacted into a snapshot) is read by the CLI
through DuckDB. The reference answers come another way: the newest batch file (every
partition is in every batch) read with pyarrow, turned into views and fed to the pure
``monitor.query.questions`` functions. Timing is the benchmark's business (bench/runbook_bench.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from bench._synthetic_store import SyntheticStore, write_store
from monitor.cli import main
from monitor.contract.state import PartitionView
from monitor.model import TopicConfig
from monitor.query.questions import audit, status, what_if

N = 100_000


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyntheticStore]:
    yield write_store(tmp_path_factory.mktemp("store100k"), N, phases=4, compact_upto=1)


@pytest.fixture(scope="module")
def reference(synthetic: SyntheticStore) -> list[PartitionView]:
    last = synthetic.phases - 1
    rows = pq.read_table(synthetic.root / "state" / f"batch_id={last}").to_pylist()
    assert len(rows) == N
    return [PartitionView.from_row(r) for r in rows]


def _json(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> Any:
    got = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert got == code, err
    return json.loads(out)


def test_status_counts_every_partition(
    synthetic: SyntheticStore, reference: list[PartitionView], capsys: pytest.CaptureFixture[str]
) -> None:
    st = _json(capsys, "status", "--store", str(synthetic.root), code=2)  # offline: CRITICAL
    ref = status(reference, [synthetic.silent_broker])
    assert st["partitions"] == ref.partitions == N
    assert st["offline"] == ref.offline == synthetic.counts["offline"]
    assert (st["under_min_isr"], st["under_replicated"]) == (
        ref.under_min_isr,
        ref.under_replicated,
    )
    assert st["under_min_isr"] > 0 and st["under_replicated"] > 0
    assert st["open_by_kind"] == dict(ref.open_by_kind)
    assert st["open_by_severity"] == dict(ref.open_by_severity)
    assert st["silent_brokers"] == [synthetic.silent_broker]
    assert st["newest_observed_at"] == ref.newest_observed_at == synthetic.newest_updated_at
    assert st["freshness"]["last_batch"] == synthetic.phases - 1


def test_partitions_with_a_finding(
    synthetic: SyntheticStore, reference: list[PartitionView], capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _json(capsys, "partitions", "--finding", "under_min_isr", "--store", str(synthetic.root))
    expected = sorted(
        (v.topic, v.partition)
        for v in reference
        if any(o.kind == "under_min_isr" for o in v.open_findings)
    )
    assert [(r["topic"], r["partition"]) for r in rows] == expected
    assert len(expected) >= synthetic.counts["under_min_isr"]
    by_topic = _json(
        capsys,
        "partitions",
        "--finding",
        "offline",
        "--topic",
        "topic-00010",
        "--store",
        str(synthetic.root),
    )
    assert [(r["topic"], r["partition"], r["leader"]) for r in by_topic] == [
        ("topic-00010", 1, None)
    ]


def test_explain_and_lineage_of_the_unclean_election(
    synthetic: SyntheticStore, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Partition 2 (brokers 3, 4, 5): leader 3 alone in the ISR goes offline, the lagging 5
    is elected uncleanly and 1000 committed offsets are gone."""
    store = str(synthetic.root)
    png = tmp_path / "p.png"
    assert main(["explain", "topic-00000", "2", "--store", store, "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    assert "Cost: 1000 committed offsets lost." in text
    assert "lost 1000 committed offsets [1000, 2000)" in text
    assert png.read_bytes()[:4] == b"\x89PNG"
    d = _json(capsys, "explain", "topic-00000", "2", "--store", store)
    # compacted: the snapshot row (batch 1) and batches 2 and 3 remain as history
    assert [s["leader"] for s in d["history"]] == [3, None, 5]
    lineage = _json(capsys, "lineage", "topic-00000", "2", "--store", store)
    assert [(e["epoch"], e["leader"]) for e in lineage] == [(5, 3), (6, None), (7, 5)]
    assert lineage[-1]["start_offset"] == 1000


def test_what_if_equals_the_pure_function(
    synthetic: SyntheticStore, reference: list[PartitionView], capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _json(
        capsys, "what-if", "--broker", "3", "--broker", "4", "--store", str(synthetic.root)
    )
    expected = [asdict(i) for i in what_if(reference, {3, 4})]
    assert len(rows) == len(expected) > N // 12
    assert rows == json.loads(json.dumps(expected, default=str))
    outcomes = {r["outcome"] for r in rows}
    assert {"offline_unclean_needed", "under_min_isr", "leader_moves"} <= outcomes


def test_audit_equals_the_pure_function(
    synthetic: SyntheticStore, reference: list[PartitionView], capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _json(capsys, "audit", "--store", str(synthetic.root))
    configs: dict[str, TopicConfig] = {}
    for v in reference:
        assert v.min_isr is not None
        unclean = v.topic in synthetic.topics_by_config["unclean_enabled"]
        configs[v.topic] = TopicConfig(len(v.replicas), v.min_isr, unclean)
    assert rows == [
        asdict(r) | {"reasons": list(r.reasons), "fixes": list(r.fixes)} for r in audit(configs)
    ]
    bad = {r["topic"] for r in rows if r["profile"] == "misconfigured"}
    assert bad == set(synthetic.topics_by_config["min_isr_1"]) | set(
        synthetic.topics_by_config["unclean_enabled"]
    )
