"""The `monitor` CLI: replay and schema, driven as a user would (through main())."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.contract.events import KINDS
from monitor.dev.testing import Timeline

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def test_replay_json_prints_one_finding_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    """--format json: every stdout line is a finding with the contract's fields."""
    code = main(["replay", str(DATA / "unclean_election.jsonl"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0
    findings = [json.loads(line) for line in out.splitlines()]
    assert {"unclean_election", "committed_data_loss"} <= {f["kind"] for f in findings}
    for f in findings:
        assert set(f) >= {"id", "kind", "state", "severity", "cluster", "topic", "partition"}
        assert f["state"] in ("open", "resolved", "event")
        assert f["severity"] in ("info", "warning", "critical")
    loss = next(f for f in findings if f["kind"] == "committed_data_loss")
    assert loss["details"]["lost_count"] == 4000
    assert "26 accepted, 0 rejected" in err


def test_replay_reports_bad_lines_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed line is named with its number and reason; the rest is still replayed."""
    tl = Timeline(topic="x")
    tl.meta(leader=None, epoch=1, replicas=[1, 2], isr=[1])
    good = tl.jsonl()
    bad = [
        "{not json",
        '{"schema_version":1,"kind":"replica","cluster":"c","observed_at":1,'
        '"topic":"t","partition":0,"broker":1,"log_end_offset":"5"}',
        '{"schema_version":1,"kind":"gossip","cluster":"c","observed_at":1}',
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text(bad[0] + "\n" + good + bad[1] + "\n" + bad[2] + "\n")
    code = main(["replay", str(path), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert f"{path}:1: rejected: invalid JSON" in err
    assert f"{path}:3: rejected: log_end_offset: Input should be a valid integer" in err
    assert f"{path}:4: rejected: kind: unknown kind 'gossip'" in err
    assert "4 lines: 1 accepted, 3 rejected" in err
    assert [json.loads(x)["kind"] for x in out.splitlines()] == ["offline"]


def test_replay_reads_stdin_and_prints_a_table() -> None:
    """FILE may be '-'; the default table names the subject and summarises the numbers."""
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "replay", "-"],
        input=(DATA / "under_min_isr_and_recovery.jsonl").read_bytes(),
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.decode()
    assert re.search(r"critical\s+under_min_isr\s+open\s+minisr/0\s+ISR size 1 < min", text)


def test_replay_missing_file_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "/nonexistent/events.jsonl"]) == 2
    assert "cannot read /nonexistent/events.jsonl" in capsys.readouterr().err


#: Seed 1's findings at warning and above: the follower's truncation is a warning, the loss
#: at its election critical (info: the election, the ISR's expansion).
SEED1_WARNINGS = {
    "truncation_below_hw", "isr_shrink", "stale_telemetry", "under_replicated", "at_min_isr",
}  # fmt: skip


@pytest.mark.parametrize(
    ("severity", "expected"),
    [
        ("critical", {"committed_data_loss"}),
        ("warning", {"committed_data_loss", *SEED1_WARNINGS}),
    ],
)
def test_replay_min_severity_filters(
    capsys: pytest.CaptureFixture[str], severity: str, expected: set[str]
) -> None:
    path = str(DATA / "seed1_hw_truncation.jsonl")
    main(["replay", path, "--format", "json", "--min-severity", severity])
    kinds = {json.loads(x)["kind"] for x in capsys.readouterr().out.splitlines()}
    assert kinds == expected


def test_schema_is_json_schema_of_all_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["$schema"].endswith("2020-12/schema")
    defs = schema["$defs"].values()
    kinds = {d["properties"]["kind"]["const"] for d in defs if "kind" in d["properties"]}
    assert kinds == set(KINDS)
    # A round record's samples: a definition of their own, referenced by partition events.
    assert "ReplicaSample" in schema["$defs"]


def test_readme_model_examples_run() -> None:
    """Every `.venv/bin/monitor ...` line of the README runs and exits 0 (``status``, a
    check, exits with its verdict: the README's example is a loss, CRITICAL)."""
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^\.venv/bin/monitor (.+?)(?:\s+#.*)?$", readme, flags=re.M)
    assert commands, "README lost its examples"
    for cmd in commands:
        proc = subprocess.run(
            [sys.executable, "-m", "monitor", *cmd.split()],
            cwd=ROOT,
            capture_output=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        expected = 2 if cmd.startswith("status") else 0
        assert proc.returncode == expected, (cmd, proc.stderr.decode()[-2000:])


def test_command_owners_match_what_the_modules_register() -> None:
    """``monitor X`` imports only X's module: the map must say who registers what."""
    import argparse
    import importlib

    from monitor.cli import COMMAND_MODULES, COMMAND_OWNERS

    registered = {}
    for name in COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(name).register(sub)
        registered.update(dict.fromkeys(sub.choices, name))
    assert registered == COMMAND_OWNERS


def test_a_runbook_command_does_not_import_the_others() -> None:
    code = (
        "import sys; from monitor.cli import build_parser; build_parser(['status']); "
        "print(sorted(m for m in ('kafka', 'pyspark', 'grafana_foundation_sdk', "
        "'monitor.dev.demo') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import metadata

    assert main(["--version"]) == 0
    shown = capsys.readouterr().out.strip()
    assert (
        shown
        == f"monitor {metadata.version('kafka-replication-monitor')} (kafka-replication-monitor)"
    )


def test_a_closed_pipe_is_no_traceback() -> None:
    """``monitor schema | true``: the reader is gone before anything is written; the
    command ends quietly with 128 + SIGPIPE, as a shell pipeline's writer does."""
    proc = subprocess.run(
        f"{sys.executable} -m monitor schema | true; exit ${{PIPESTATUS[0]}}",
        shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert proc.returncode == 141


def test_a_missing_extra_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without pyspark (the 'spark' extra), ``monitor stream`` says which extra to install."""
    import builtins

    real_import = builtins.__import__

    def no_pyspark(name: str, *args: object, **kwargs: object) -> object:
        if name == "pyspark" or name.startswith("pyspark."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    for mod in [m for m in sys.modules if m.startswith(("pyspark", "streaming"))]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(builtins, "__import__", no_pyspark)
    code = main(["stream", "--once", "--bootstrap", "127.0.0.1:9", "--checkpoint", "/tmp/x"])
    err = capsys.readouterr().err
    assert code == 78, err
    assert err.startswith("monitor stream: needs the 'spark' extra (no module pyspark")
    # No index serves the package: the line says how to install it from a clone.
    assert "pip install './[spark]' from a clone" in err and "Traceback" not in err


def test_usage_errors_have_their_own_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    """64 (EX_USAGE) on every command: argparse's own 2 would read as status's CRITICAL."""
    for argv in (["status", "--no-such-flag"], ["replay"], ["no-such-command"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 64, argv
    assert "error:" in capsys.readouterr().err


def test_replay_json_is_format_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(DATA / "unclean_election.jsonl"), "--json"]) == 0
    json_lines = capsys.readouterr().out.splitlines()
    assert main(["replay", str(DATA / "unclean_election.jsonl"), "--format", "json"]) == 0
    assert capsys.readouterr().out.splitlines() == json_lines and json_lines


def test_replay_takes_a_shipped_scenario_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "unclean_election", "--json"]) == 0
    kinds = {json.loads(ln)["kind"] for ln in capsys.readouterr().out.splitlines()}
    assert {"unclean_election", "committed_data_loss"} <= kinds
    assert main(["replay", "no_such_scenario"]) == 2
    assert "cannot read no_such_scenario" in capsys.readouterr().err


def test_assets_are_listed_and_exported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["assets", "list"]) == 0
    listed = capsys.readouterr().out.split()
    shipped = [
        "pom.xml",
        "alertmanager/route.yml",
        "prometheus/rules/replication.yml",
        "scenarios/unclean_election.jsonl",
        "jmx-exporter/kafka-replication.yaml",
    ]
    assert set(shipped) <= set(listed)
    assert main(["assets", "export", str(tmp_path)]) == 0
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written == sorted(listed)
    assert (tmp_path / "pom.xml").read_text() == (ROOT / "deploy" / "pom.xml").read_text()


def test_spark_jars_are_copied_into_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`monitor assets spark-jars DIR`: the folder the job's `jars` setting names where
    Maven is not (the image, a VM) holds exactly the jars the job would resolve."""
    from monitor.jars import spark_kafka_jars

    assert main(["assets", "spark-jars", str(tmp_path / "jars")]) == 0
    written = sorted(p.name for p in (tmp_path / "jars").iterdir())
    assert written == sorted(p.name for p in spark_kafka_jars())
    assert any(n.startswith("spark-sql-kafka") for n in written)
    assert f"wrote {len(written)} jars" in capsys.readouterr().out


def _shifted(lines: list[str], to: int) -> str:
    """The events with every stamp moved so that the newest is ``to``."""
    events = [json.loads(line) for line in lines if line.strip()]
    newest = max(e["observed_at"] for e in events)
    for e in events:
        e["observed_at"] += to - newest
        for s in e.get("replica_samples") or ():
            if s.get("observed_at") is not None:
                s["observed_at"] += to - newest
    return "".join(json.dumps(e) + "\n" for e in events)


@pytest.mark.parametrize("newest", [253_405_000_000_000, 2**63 - 1], ids=["year-10000", "int64"])
def test_tables_show_any_stamp_the_contract_allows(
    newest: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 50: a stamp in the year 10000 or later (the contract allows up to 2^63-1)
    crashed the table output of ``replay`` and ``status`` -- a traceback naming no line."""
    path = tmp_path / "far.jsonl"
    path.write_text(_shifted((DATA / "unclean_election.jsonl").read_text().splitlines(), newest))
    assert main(["replay", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "committed_data_loss" in out and "0 rejected" in err, err
    year = "+10000-02-01T" if newest < 2**63 - 1 else "+292278994-08-17T07:1"
    assert year in out, out
    assert main(["status", "--events", str(path)]) == 2  # CRITICAL: the loss
    out, _ = capsys.readouterr()
    assert "CRITICAL" in out and "+" in out, out


def test_a_table_never_writes_a_control_character() -> None:
    """Text the contract allows anywhere (a cluster name is any string) is shown escaped in
    tables: an escape sequence or a newline in a cell cannot redraw or split the output."""
    from monitor.query.render import table

    out = table([["lab\x1b[2J", "two\nlines"]], ["CLUSTER", "NOTE"])
    assert "\x1b" not in out and out.count("\n") == 1, out
    assert out.splitlines()[1].split() == ["lab\\x1b[2J", "two\\nlines"]


def test_status_of_events_names_a_broker_gone_silent(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 50: ``status --events`` said "silent brokers: none" while the replay had
    ``stale_telemetry`` open on broker 3 (a broker that stops answering sends no report
    saying so: its last one said alive)."""
    code = main(["status", "--events", str(DATA / "broker_goes_silent.jsonl"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["silent_brokers"] == [3], out
    assert code == 1 and out["status"] == "WARNING"


def test_what_if_counts_a_broker_already_down_as_no_survivor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 50: after the unclean election broker 1 is dead; ``what-if --broker 2`` counted
    it as a survivor ("committed at stake: 0" from its last, stale log end)."""
    path = DATA / "unclean_election.jsonl"
    assert main(["what-if", "--events", str(path), "--broker", "2", "--json"]) == 0
    (impact,) = json.loads(capsys.readouterr().out)
    assert impact["surviving_replicas"] == [] and impact["outcome"] == "offline_no_replica"
    assert main(["what-if", "--events", str(path), "--broker", "2"]) == 0
    assert "brokers [1] are down already" in capsys.readouterr().out
