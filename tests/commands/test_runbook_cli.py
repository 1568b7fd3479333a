"""The runbook commands on replayed incidents: numbers right, errors clear, --json usable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from monitor.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
UNCLEAN = str(DATA / "unclean_election.jsonl")


def _json(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> Any:
    assert main([*argv, "--json"]) == code
    return json.loads(capsys.readouterr().out)


def test_status_counts_the_incident(capsys: pytest.CaptureFixture[str]) -> None:
    """The loss is over (no open critical condition) yet the check says CRITICAL: a one-off
    finding counts for the window, not only the instant it happened."""
    st = _json(capsys, "status", "--events", UNCLEAN, code=2)
    assert st["partitions"] == 1 and st["offline"] == 0 and st["under_replicated"] == 1
    assert st["silent_brokers"] == [1]
    assert st["open_by_severity"].get("critical", 0) == 0
    assert (st["status"], st["exit_code"]) == ("CRITICAL", 2)
    events = {(e["kind"], e["severity"]): e["count"] for e in st["events_in_window"]["by_kind"]}
    assert events[("committed_data_loss", "critical")] == 1
    assert events[("unclean_election", "critical")] == 1
    assert st["summary"].startswith("CRITICAL - 1 committed_data_loss in the window")


def test_status_says_which_findings_an_admin_only_collection_cannot_give(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No replica sample reached any partition (the collector read the Admin API only):
    status names the kinds it cannot judge rather than staying silent; with samples, none."""
    admin_only = str(DATA / "unclean_election_admin_only.jsonl")
    st = _json(capsys, "status", "--events", admin_only, code=2)
    assert st["without_replica_samples"] == st["partitions"] == 1
    assert st["unavailable"] == ["follower_lag", "hw_lag", "log_divergence", "truncation_below_hw"]
    main(["status", "--events", admin_only])
    assert "replica samples:    none (Admin API only): follower_lag" in capsys.readouterr().out
    st = _json(capsys, "status", "--events", UNCLEAN, code=2)
    assert (st["without_replica_samples"], st["unavailable"]) == (0, [])


@pytest.mark.parametrize(
    ("scenario", "extra", "code", "word"),
    [
        ("healthy_steady_state", [], 0, "OK"),
        # a broker restart's ISR shrink and expand: over once the ISR is whole again
        ("broker_restart_no_flicker", [], 0, "OK"),
        ("follower_stuck_in_isr", [], 1, "WARNING"),
        ("unclean_election", [], 2, "CRITICAL"),
        # a window that ends before the loss: only the open conditions are left (warnings)
        ("unclean_election", ["--window", "1ms"], 1, "WARNING"),
    ],
)
def test_status_is_a_monitoring_plugin_check(
    capsys: pytest.CaptureFixture[str], scenario: str, extra: list[str], code: int, word: str
) -> None:
    """Exit codes 0/1/2 as Nagios, Icinga and Sensu read them; the first line says why."""
    argv = ["status", "--events", str(DATA / f"{scenario}.jsonl"), *extra]
    assert main(argv) == code
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"{word} - "), first


def test_partitions_lists_one_off_findings(capsys: pytest.CaptureFixture[str]) -> None:
    """``--finding`` takes event kinds: the loss, with its numbers, for the window."""
    rows = _json(capsys, "partitions", "--finding", "committed_data_loss", "--events", UNCLEAN)
    assert [(r["topic"], r["partition"]) for r in rows] == [("unclean", 0)]
    assert (rows[0]["details"]["lost_count"], rows[0]["at"]) == (4000, 1700000050000)
    assert rows[0]["summary"].startswith("lost 4000 committed offsets [1000, 5000)")
    rows = _json(
        capsys,
        "partitions",
        "--finding",
        "committed_data_loss",
        "--events",
        UNCLEAN,
        "--since",
        "1ms",
    )
    assert rows == []
    rows = _json(
        capsys,
        "partitions",
        "--finding",
        "committed_data_loss",
        "--events",
        str(DATA / "healthy_steady_state.jsonl"),
    )
    assert rows == []


def test_a_counted_unclean_election_is_critical_and_said_to_have_no_partition(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The controllers' counter names no partition: status pages on it, partitions says so."""
    counted = str(DATA / "controller_counts_unclean_election.jsonl")
    assert main(["status", "--events", counted]) == 2
    assert capsys.readouterr().out.startswith("CRITICAL - 2 unclean_election in the window")
    assert main(["partitions", "--finding", "unclean_election", "--events", counted]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "no partition had a unclean_election in the window",
        "and 2 unclean_election without a partition in the window (a controller's counter: "
        "see docs/runbook.md#unclean_election_counted)",
    ]


def test_partitions_lists_matching_partitions(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(
        capsys,
        "partitions",
        "--finding",
        "under_min_isr",
        "--events",
        str(DATA / "follower_stuck_in_isr.jsonl"),
    )
    assert rows == []
    rows = _json(capsys, "partitions", "--finding", "under_replicated", "--events", UNCLEAN)
    assert isinstance(rows, list) and [(r["topic"], r["partition"]) for r in rows] == [
        ("unclean", 0)
    ]
    assert rows[0]["isr"] == [2]


def test_explain_tells_the_story_and_draws_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The story names the unclean election and the cost; --plot writes a PNG."""
    png = tmp_path / "unclean.png"
    assert main(["explain", "unclean", "0", "--events", UNCLEAN, "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "UNCLEAN election: leader 1 -> 2, epoch 5 -> 6, start offset 1000" in out
    assert "Cost: 4000 committed offsets lost." in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_lineage_is_the_epoch_history(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(capsys, "lineage", "unclean", "0", "--events", UNCLEAN)
    assert isinstance(rows, list)
    assert [(r["epoch"], r["start_offset"], r["leader"]) for r in rows] == [
        (4, None, 1),
        (5, None, None),
        (6, 1000, 2),
    ]


def test_what_if_predicts_offline(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(capsys, "what-if", "--broker", "2", "--events", UNCLEAN)
    # The old leader 1 is dead (its stale_telemetry open): no replica survives broker 2 --
    # not "an unclean election needed" from broker 1's last log end (issue 50).
    assert isinstance(rows, list) and rows[0]["outcome"] == "offline_no_replica"
    assert rows[0]["surviving_replicas"] == [] and rows[0]["committed_at_stake"] == 0


def test_audit_names_the_misconfiguration(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(capsys, "audit", "--events", str(DATA / "durability_misconfigurations.jsonl"))
    assert isinstance(rows, list)
    prof = {r["topic"]: (r["profile"], r["reasons"]) for r in rows}
    assert prof["cp-ok"] == ("CP", [])
    assert prof["rf1"] == ("misconfigured", ["rf_1"])
    assert prof["minisr1"] == ("CP", [])  # fixed later in the file


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain", "nope", "0", "--events", UNCLEAN], "unknown partition nope/0"),
        (["status"], "no state to read"),
        (["status", "--events", "/nonexistent.jsonl"], "cannot read events file"),
        (["audit", "--topic", "zzz", "--events", UNCLEAN], "no configuration seen for topic zzz"),
    ],
)
def test_clear_errors(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(argv) == (3 if argv[0] == "status" else 2)  # status: UNKNOWN
    assert message in capsys.readouterr().err


# -- --store: the streaming job's state store ------------------------------------------------


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bench._synthetic_store import write_store

    return write_store(tmp_path_factory.mktemp("store"), 1000, phases=4).root


def test_store_errors_name_the_path_and_the_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, small_store: Path
) -> None:
    missing, empty = tmp_path / "missing", tmp_path / "empty"
    empty.mkdir()
    (empty / "state").mkdir()  # a folder, but nothing written yet
    cases = [
        (["status", "--store", str(missing)], f"state store {missing} does not exist"),
        (["status", "--store", str(empty)], f"state store {empty} is empty"),
        (
            ["explain", "nope", "0", "--store", str(small_store)],
            f"unknown partition nope/0 in store {small_store}: no topic nope "
            "(topics known: topic-00000, ",
        ),
        (
            ["lineage", "topic-00003", "100", "--store", str(small_store)],
            f"unknown partition topic-00003/100 in store {small_store}: topic topic-00003 "
            "has 100 partitions (0..99)",
        ),
        (
            ["status", "--store", str(small_store), "--prometheus", "http://127.0.0.1:9"],
            "cannot reach Prometheus at http://127.0.0.1:9: ",
        ),
    ]
    for argv, message in cases:
        # status is a check: what it cannot read is UNKNOWN (3); the other commands fail (2)
        assert main(argv) == (3 if argv[0] == "status" else 2), argv
        err = capsys.readouterr().err
        assert err.startswith(f"monitor {argv[0]}: ") and message in err, err


def test_store_and_events_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["status", "--store", "x", "--events", UNCLEAN])
    assert e.value.code == 64  # a usage error: not status's CRITICAL (2)
    assert "not allowed with argument" in capsys.readouterr().err


def test_monitor_store_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, small_store: Path
) -> None:
    monkeypatch.setenv("MONITOR_STORE", str(small_store))
    st = _json(capsys, "status", code=2)
    assert st["partitions"] == 1000 and st["offline"] == 1
    assert st["source"] == f"store {small_store}"
    # --events still wins over the environment
    st = _json(capsys, "status", "--events", UNCLEAN, code=2)
    assert st["partitions"] == 1


def test_a_stale_store_is_unknown(capsys: pytest.CaptureFixture[str], small_store: Path) -> None:
    """A store the job stopped writing cannot vouch for the cluster: UNKNOWN, saying since
    when -- whatever it last held."""
    st = _json(capsys, "status", "--store", str(small_store), "--stale-after", "0s", code=3)
    assert st["status"] == "UNKNOWN" and "the job last wrote" in st["summary"]
