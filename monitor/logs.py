"""Logging of the long-running commands (``monitor collect``, ``monitor stream``): one level,
one format -- text lines or JSON lines -- on standard error.

:func:`add_arguments` gives a parser ``--log-level`` and ``--log-format``; :func:`configure`
installs the handler they describe (again: replaces it).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Clients that chatter at INFO (kafka-python reconnecting during faults, py4j's gateway):
#: WARNING and up only, unless the level is debug.
NOISY = ("kafka", "py4j")

# What every LogRecord has: the rest are a call's ``extra=`` and go into the JSON object.
_RECORD_ATTRS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, the
    exception's traceback text as ``exception`` (if any), then the call's ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC)
        out: dict[str, Any] = {
            "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        # A cached exc_text first, as logging.Formatter does: a filter may have redacted it
        # (monitor.collector.security.SecretRedactor).
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRS and key not in out:
                out[key] = value
        return json.dumps(out, default=str, ensure_ascii=False)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record comes (as logging's last resort
    does): a replaced stderr (a test's capture, a closed one) is never held on to."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def formatter(fmt: str) -> logging.Formatter:
    if fmt == "json":
        return JsonFormatter()
    if fmt == "text":
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f"log format {fmt!r}: expected one of {', '.join(FORMATS)}")


def configure(level: str = "info", fmt: str = "text") -> None:
    """The root logger at ``level`` (one of :data:`LEVELS`), one handler on stderr in ``fmt``
    (``text`` or ``json``); a handler this installed before is replaced, others are kept."""
    if level.lower() not in LEVELS:
        raise ValueError(f"log level {level!r}: expected one of {', '.join(LEVELS)}")
    number = logging.getLevelNamesMapping()[level.upper()]
    handler = _StderrHandler()
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(number)
    for name in NOISY:
        logging.getLogger(name).setLevel(
            number if number <= logging.DEBUG else max(number, logging.WARNING)
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--log-level`` (default info) and ``--log-format`` (default text)."""
    parser.add_argument(
        "--log-level",
        type=str.lower,
        choices=LEVELS,
        default="info",
        help="least severe log record written (default info)",
    )
    parser.add_argument(
        "--log-format",
        choices=FORMATS,
        default="text",
        help="text lines, or json: one object per line with time, level, logger, message "
        "(and exception) (default text)",
    )


def configure_from(args: argparse.Namespace) -> None:
    """:func:`configure` with the parsed ``--log-level`` and ``--log-format``."""
    configure(args.log_level, args.log_format)
