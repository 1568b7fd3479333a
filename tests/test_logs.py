"""monitor.logs: ``--log-level`` and ``--log-format`` of ``monitor collect`` and ``monitor
stream`` (issue 19), one setup for both."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from monitor import logs
from monitor.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _root_logger() -> Iterator[None]:
    """Each test's configure() undone: the root logger as it was (pytest's handlers too)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    noisy = {name: logging.getLogger(name).level for name in logs.NOISY}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, lvl in noisy.items():
        logging.getLogger(name).setLevel(lvl)


def _record(**kw: object) -> logging.LogRecord:
    args = {"name": "monitor.collector", "level": logging.WARNING, "pathname": __file__,
            "lineno": 1, "msg": "round: %d events", "args": (3,), "exc_info": None}  # fmt: skip
    args.update(kw)
    return logging.LogRecord(**args)  # type: ignore[arg-type]


def test_a_json_line_carries_time_level_logger_and_message() -> None:
    line = logs.JsonFormatter().format(_record())
    assert "\n" not in line
    out = json.loads(line)
    assert out["level"] == "WARNING"
    assert out["logger"] == "monitor.collector"
    assert out["message"] == "round: 3 events"
    assert out["time"].endswith("Z")
    assert datetime.fromisoformat(out["time"]).utcoffset() is not None
    assert "exception" not in out


def test_a_json_line_carries_the_exception_and_extra_fields() -> None:
    try:
        raise RuntimeError("broker 2 went away\nsecond line")
    except RuntimeError:
        exc_info = sys.exc_info()
    line = logs.JsonFormatter().format(_record(exc_info=exc_info))
    assert "\n" not in line  # one record, one line: the traceback's newlines are escaped
    out = json.loads(line)
    assert (
        "Traceback" in out["exception"] and "RuntimeError: broker 2 went away" in out["exception"]
    )
    record = _record()
    record.broker = 2
    assert json.loads(logs.JsonFormatter().format(record))["broker"] == 2


def test_a_redacted_traceback_stays_redacted() -> None:
    """A filter (the collector's SecretRedactor) may have replaced exc_text: it is used."""
    try:
        raise RuntimeError("password s3cret")
    except RuntimeError:
        record = _record(exc_info=sys.exc_info())
    record.exc_text = "RuntimeError: password [REDACTED]"
    assert json.loads(logs.JsonFormatter().format(record))["exception"].endswith("[REDACTED]")


def test_configure_installs_one_handler_in_the_format_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("warning", "json")
    logs.configure("debug", "json")  # again: replaces, not adds
    root = logging.getLogger()
    assert root.level == logging.DEBUG
    logging.getLogger("monitor.test").debug("hello %s", "there")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert json.loads(lines[0])["message"] == "hello there"

    logs.configure("info", "text")
    logging.getLogger("monitor.test").debug("not shown")
    logging.getLogger("monitor.test").info("shown")
    logging.getLogger("kafka.net").info("reconnect chatter")  # a noisy client: WARNING only
    err = capsys.readouterr().err
    assert err.endswith(" INFO monitor.test: shown\n") and err.count("\n") == 1, err


def test_configure_refuses_what_it_does_not_know() -> None:
    with pytest.raises(ValueError, match="log level 'loud'"):
        logs.configure("loud")
    with pytest.raises(ValueError, match="log format 'xml'"):
        logs.configure("info", "xml")


@pytest.mark.parametrize("command", ["collect", "stream"])
def test_both_commands_take_the_logging_flags(command: str) -> None:
    parser = build_parser([command])
    args = parser.parse_args([command])
    assert (args.log_level, args.log_format) == ("info", "text")
    args = parser.parse_args([command, "--log-level", "DEBUG", "--log-format", "json"])
    assert (args.log_level, args.log_format) == ("debug", "json")


@pytest.mark.parametrize("command", ["collect", "stream"])
@pytest.mark.parametrize("flag", [["--log-level", "verbose"], ["--log-format", "xml"]])
def test_a_bad_logging_flag_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], command: str, flag: list[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser([command]).parse_args([command, *flag])
    assert e.value.code == 64  # EX_USAGE
    assert "invalid choice" in capsys.readouterr().err


def test_the_standalone_job_parser_says_64_too(capsys: pytest.CaptureFixture[str]) -> None:
    from streaming.cli import build_parser as job_parser

    with pytest.raises(SystemExit) as e:
        job_parser().parse_args(["--log-level", "verbose"])
    assert e.value.code == 64
    capsys.readouterr()


def test_monitor_collect_logs_json_lines() -> None:
    """Every line on stderr is a JSON object (here: kafka-python's connection errors)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MONITOR_")},
        "MONITOR_COLLECTOR_KAFKA__BOOTSTRAP_TIMEOUT_MS": "500",
        "MONITOR_COLLECTOR_KAFKA__REQUEST_TIMEOUT_MS": "500",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "collect", "--check", "--bootstrap", "127.0.0.1:9",
         "--log-format", "json", "--log-level", "warning"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr  # the check failed: nothing listens there
    lines = proc.stderr.splitlines()
    assert lines, "kafka-python logs the refused connection"
    for line in lines:
        out = json.loads(line)
        assert {"time", "level", "logger", "message"} <= set(out)
        assert out["level"] in ("WARNING", "ERROR", "CRITICAL")
