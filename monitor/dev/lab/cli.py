"""``monitor lab ...``: run the local Kafka lab and inject faults from the command line.

Every subcommand that acts on a running lab finds it through the state file in ``--dir``
(default ``<cache>/lab``), so `up` in one terminal and `kill 2` in another just work.
Exit codes: 0 success, 1 lab error (message on stderr), 3 ``verify`` found acknowledged
data lost.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from kafka.errors import KafkaError
from pydantic import ValidationError

from monitor import jars
from monitor.dev.lab import admin, load
from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.config import DEFAULT_BASE_PORT, LabConfig
from monitor.dev.lab.errors import LabError
from monitor.dev.lab.paths import default_lab_dir
from monitor.jars import JarError

EXIT_DATA_LOST = 3

Handler = Callable[[argparse.Namespace], int]


def _guarded(handler: Handler) -> Handler:
    """Turn LabError into a one-line message and exit code 1 (no traceback)."""

    def run(args: argparse.Namespace) -> int:
        # kafka-python logs every refused connection at ERROR; while brokers are being
        # started, killed and paused on purpose that is noise, not news.
        kafka_logger = logging.getLogger("kafka")
        if kafka_logger.level == logging.NOTSET:
            kafka_logger.setLevel(logging.CRITICAL)
        try:
            return handler(args)
        except (LabError, JarError) as exc:
            print(f"lab: error: {exc}", file=sys.stderr)
            return 1
        except KafkaError as exc:
            # Expected while faults are injected (a paused leader times requests out).
            print(f"lab: kafka error: {exc!r}", file=sys.stderr)
            return 1

    run.__doc__ = handler.__doc__
    return run


def _lab_dir(args: argparse.Namespace) -> Path:
    return Path(args.dir) if args.dir else default_lab_dir()


def _lab(args: argparse.Namespace) -> Lab:
    return Lab.load(_lab_dir(args))


# -- handlers -----------------------------------------------------------------------------


def _cmd_jars(args: argparse.Namespace) -> int:
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = [s for s in sets if s not in {j.value for j in jars.JarSet}]
    if unknown:
        raise LabError(f"unknown jar set(s) {unknown}; choose from kafka, jmx, spark")
    paths = jars.resolve(sets, spark_version=args.spark_version)
    for name in ("kafka", "jmx", "spark"):
        folder = getattr(paths, name)
        if folder is not None:
            print(f"{name}: {folder}")
    return 0


def _cmd_up(args: argparse.Namespace) -> int:
    directory = _lab_dir(args)
    if args.fresh and directory.exists():
        existing = Lab.load(directory) if (directory / "lab.json").is_file() else None
        if existing is not None:
            existing.down()
        shutil.rmtree(directory)
    try:
        config = LabConfig(
            dir=directory,
            base_port=args.base_port,
            heap=args.heap,
            elr=not args.no_elr,
            security=args.security,
            kafka_version=args.kafka_version,
            metadata="zookeeper" if args.zookeeper else "kraft",
        )
    except ValidationError as exc:
        why = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise LabError(why) from None
    lab = Lab(config)
    lab.up(timeout=args.timeout)
    _print_status(lab)
    if config.secured:
        _print_secure_settings(config)
    return 0


def _print_secure_settings(config: LabConfig) -> None:
    """The collector's and the job's settings for the SECURE listener (files, no secrets)."""
    from monitor.dev.lab import security

    bootstrap = config.secure_bootstrap_servers
    print(f"\nsecured listener ({config.security}): {bootstrap}; key material in "
          f"{config.security_dir}")  # fmt: skip
    settings = security.kafka_settings(config.dir, config.security, bootstrap)
    for who, prefix in (
        ("collector", "MONITOR_COLLECTOR_"),
        ("streaming job", "MONITOR_STREAMING_"),
    ):
        print(f"{who} (environment):")
        for key, value in settings.items():
            print(f"  {prefix}KAFKA__{key.upper()}={value}")


def _cmd_down(args: argparse.Namespace) -> int:
    directory = _lab_dir(args)
    if not (directory / "lab.json").is_file():
        print(f"no lab in {directory}")
        return 0
    lab = Lab.load(directory)
    lab.down()
    if args.wipe:
        shutil.rmtree(directory)
        print(f"removed {directory}")
    return 0


def _print_status(lab: Lab) -> None:
    print(
        f"lab {lab.config.dir}  cluster {lab.cluster_id}  bootstrap {lab.config.bootstrap_servers}"
    )
    print(f"{'broker':>6} {'status':>8} {'pid':>8} {'port':>6} {'ctrl':>6} {'jmx':>6}  metrics")
    for info in lab.status():
        print(
            f"{info.node:>6} {info.status.value:>8} {info.pid or '-':>8} {info.broker_port:>6} "
            f"{info.controller_port:>6} {info.jmx_port:>6}  {lab.jmx_urls[info.node]}"
        )


def _cmd_status(args: argparse.Namespace) -> int:
    lab = _lab(args)
    if args.json:
        print(
            json.dumps(
                {
                    "dir": str(lab.config.dir),
                    "cluster_id": lab.cluster_id,
                    "bootstrap_servers": lab.config.bootstrap_servers,
                    "brokers": [
                        {
                            "broker": i.node,
                            "status": i.status.value,
                            "pid": i.pid,
                            "broker_port": i.broker_port,
                            "controller_port": i.controller_port,
                            "jmx_port": i.jmx_port,
                            "jmx_url": lab.jmx_urls[i.node],
                        }
                        for i in lab.status()
                    ],
                },
                indent=2,
            )
        )
    else:
        _print_status(lab)
    return 0


def _fault(action: str) -> Handler:
    def run(args: argparse.Namespace) -> int:
        lab = _lab(args)
        if action == "start":
            lab.start(args.broker, wait=not args.no_wait)
        else:
            getattr(lab, action)(args.broker)
        return 0

    return run


def _cmd_unclean_elect(args: argparse.Namespace) -> int:
    lab = _lab(args)
    before = admin.describe_topic(lab.bootstrap_servers, args.topic)
    admin.elect_leader(lab.bootstrap_servers, args.topic, args.partition, unclean=True)
    after = admin.wait_for_partitions(
        lab.bootstrap_servers,
        args.topic,
        lambda ps: any(p.partition == args.partition and p.leader >= 0 for p in ps),
        timeout_s=30,
        what=f"partition {args.partition} led",
        with_elr=True,
    )
    for state in before + after:
        if state.partition == args.partition:
            print(_describe_line(state))
    return 0


def _cmd_preferred_elect(args: argparse.Namespace) -> int:
    lab = _lab(args)
    if args.partition is not None and args.topic is None:
        raise LabError("a partition needs a topic")
    admin.elect_leader(lab.bootstrap_servers, args.topic, args.partition, unclean=False)
    if args.topic:
        for state in admin.describe_topic(lab.bootstrap_servers, args.topic):
            print(_describe_line(state))
    return 0


def _parse_assignments(text: str | None) -> dict[int, list[int]] | None:
    """``"0:1,2;1:2,3"`` -> ``{0: [1, 2], 1: [2, 3]}``."""
    if not text:
        return None
    out: dict[int, list[int]] = {}
    try:
        for part in text.split(";"):
            pid, replicas = part.split(":")
            out[int(pid)] = [int(r) for r in replicas.split(",")]
    except ValueError as exc:
        raise LabError(f"bad --assign {text!r}; expected e.g. '0:1,2;1:2,3'") from exc
    return out


def _cmd_topic_create(args: argparse.Namespace) -> int:
    lab = _lab(args)
    states = admin.create_topic(
        lab.bootstrap_servers,
        args.name,
        partitions=args.partitions,
        replication_factor=args.rf,
        min_insync_replicas=args.min_isr,
        unclean_leader_election=args.unclean,
        assignments=_parse_assignments(args.assign),
    )
    for state in states:
        print(_describe_line(state))
    return 0


def _describe_line(s: admin.PartitionState) -> str:
    elr = (
        "" if s.elr is None else f" elr={list(s.elr)} last_known_elr={list(s.last_known_elr or ())}"
    )
    return (
        f"{s.topic}-{s.partition}: leader={s.leader} epoch={s.leader_epoch} "
        f"replicas={list(s.replicas)} isr={list(s.isr)} offline={list(s.offline)}{elr}"
    )


def _cmd_describe(args: argparse.Namespace) -> int:
    lab = _lab(args)
    states = admin.describe_topic(lab.bootstrap_servers, args.topic, with_elr=True)
    if not states:
        raise LabError(f"topic {args.topic} not found")
    try:
        hws: dict[int, int] = admin.end_offsets(lab.bootstrap_servers, args.topic, timeout_s=5)
    except (LabError, JarError, KafkaError) as exc:
        # A paused or dead leader cannot answer ListOffsets: show the rest anyway.
        print(f"(high watermarks unavailable: {exc!r})", file=sys.stderr)
        hws = {}
    for state in states:
        print(f"{_describe_line(state)} hw={hws.get(state.partition, '?')}")
    return 0


def _cmd_produce(args: argparse.Namespace) -> int:
    lab = _lab(args)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        stats = load.produce(
            lab.bootstrap_servers,
            args.topic,
            rate=args.rate,
            acks=args.acks,
            duration_s=args.duration,
            count=args.count,
            log_path=Path(args.log) if args.log else None,
            stop=stop,
            progress=lambda st: print(f"[produce] {st.summary()}", flush=True),
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(stats.summary())
    if args.log:
        print(f"ack log: {args.log}")
    return 0 if stats.failed == 0 else 1


def _cmd_verify(args: argparse.Namespace) -> int:
    lab = _lab(args)
    report = load.verify(lab.bootstrap_servers, args.topic, Path(args.log), settle_s=args.settle)
    print(report.render())
    return EXIT_DATA_LOST if report.lost_count else 0


# -- registration ---------------------------------------------------------------------------


def _add_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir", default=None, help="lab work folder (default: <cache>/lab, cache=$MONITOR_CACHE)"
    )


def _leaf(
    sub: Any, name: str, handler: Handler, help_text: str, *, with_dir: bool = True
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text)
    if with_dir:
        _add_dir(parser)
    parser.set_defaults(func=_guarded(handler))
    return parser


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``lab`` and its subcommands to the ``monitor`` CLI."""
    lab_parser: argparse.ArgumentParser = sub.add_parser(
        "lab",
        help="local 3-node Kafka 4.x KRaft cluster with fault injection",
        description="Run a local Kafka KRaft cluster from Maven Central jars and break it.",
    )
    lab_sub = lab_parser.add_subparsers(dest="lab_command", metavar="LAB_COMMAND")
    lab_sub.required = True

    p = _leaf(
        lab_sub, "jars", _cmd_jars, "resolve the lab's jars with mvn (cached)", with_dir=False
    )
    p.add_argument("--sets", default="kafka,jmx,spark", help="comma list of kafka,jmx,spark")
    p.add_argument(
        "--spark-version", default=None, help="spark-sql-kafka version (default: pyspark's)"
    )

    p = _leaf(lab_sub, "up", _cmd_up, "format (first time) and start the cluster, wait until ready")
    p.add_argument(
        "--base-port",
        type=int,
        default=DEFAULT_BASE_PORT,
        help=f"client port of broker 1 (default {DEFAULT_BASE_PORT}); "
        "controllers +100, JMX exporters +200",
    )
    p.add_argument("--heap", default="384m", help="broker -Xmx (default 384m)")
    p.add_argument(
        "--no-elr",
        action="store_true",
        help="format with eligible.leader.replicas.version=0 (KIP-966 off)",
    )
    p.add_argument(
        "--kafka-version",
        default=jars.KAFKA_VERSION,
        help=f"Kafka version from Maven Central (default {jars.KAFKA_VERSION}; tested: "
        f"{', '.join(jars.KAFKA_VERSIONS_TESTED)})",
    )
    p.add_argument(
        "--zookeeper",
        action="store_true",
        help="ZooKeeper mode (Kafka 3.x): one ZooKeeper server at base port +100",
    )
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait for brokers")
    p.add_argument("--fresh", action="store_true", help="wipe the lab folder first")
    p.add_argument(
        "--security",
        choices=["plaintext", "sasl_ssl", "mtls", "oauthbearer"],
        default="plaintext",
        help="add a SECURE listener (base port +300): SCRAM-SHA-512 over TLS, mutual TLS, or "
        "OAUTHBEARER over TLS with a token file (Kafka 3.9: --kafka-version 3.9.2); prints the "
        "client settings (docs/lab.md)",
    )

    p = _leaf(lab_sub, "down", _cmd_down, "stop every broker this lab started (by pid)")
    p.add_argument("--wipe", action="store_true", help="also delete the lab folder")

    p = _leaf(lab_sub, "status", _cmd_status, "show brokers, ports, pids, alive/paused/stopped")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    faults = {
        "stop": "SIGTERM a broker (controlled shutdown; SIGKILL after a grace period)",
        "kill": "SIGKILL a broker (crash)",
        "pause": "SIGSTOP a broker (hung process, sockets stay open)",
        "resume": "SIGCONT a paused broker",
        "start": "restart a stopped/killed broker with the same config",
    }
    for action, text in faults.items():
        p = _leaf(lab_sub, action, _fault(action), text)
        p.add_argument("broker", type=int, help="broker (node) id, 1-based")
        if action == "start":
            p.add_argument("--no-wait", action="store_true", help="don't wait for registration")

    p = _leaf(
        lab_sub,
        "unclean-elect",
        _cmd_unclean_elect,
        "force an UNCLEAN leader election (ElectLeaders type 1) for one partition",
    )
    p.add_argument("topic")
    p.add_argument("partition", type=int)

    p = _leaf(
        lab_sub,
        "preferred-elect",
        _cmd_preferred_elect,
        "PREFERRED leader election (all partitions when no topic given)",
    )
    p.add_argument("topic", nargs="?", default=None)
    p.add_argument("partition", nargs="?", type=int, default=None)

    topic_parser: argparse.ArgumentParser = lab_sub.add_parser("topic", help="topic admin")
    topic_sub = topic_parser.add_subparsers(dest="topic_command", metavar="TOPIC_COMMAND")
    topic_sub.required = True
    p = _leaf(topic_sub, "create", _cmd_topic_create, "create a topic and wait for its leaders")
    p.add_argument("name")
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--rf", type=int, default=3, help="replication factor")
    p.add_argument("--min-isr", type=int, default=2, help="min.insync.replicas")
    p.add_argument("--unclean", action="store_true", help="unclean.leader.election.enable=true")
    p.add_argument(
        "--assign",
        default=None,
        help="explicit replicas, leader first: '0:1,2;1:2,3' (overrides --partitions/--rf)",
    )

    p = _leaf(lab_sub, "describe", _cmd_describe, "leader, epoch, ISR, ELR and HW per partition")
    p.add_argument("topic")

    p = _leaf(
        lab_sub,
        "produce",
        _cmd_produce,
        "steady load; every acknowledged (partition, offset, seq) goes to --log",
    )
    p.add_argument("topic")
    p.add_argument("--rate", type=float, required=True, help="records per second")
    p.add_argument("--acks", choices=["all", "1", "0"], default="all")
    p.add_argument("--duration", type=float, default=None, help="seconds (default: until Ctrl-C)")
    p.add_argument("--count", type=int, default=None, help="stop after this many records")
    p.add_argument("--log", default=None, help="ack log file (JSON lines, appended)")

    p = _leaf(
        lab_sub,
        "verify",
        _cmd_verify,
        "read the topic and report acknowledged records that were lost (exit 3 if any)",
    )
    p.add_argument("topic")
    p.add_argument("--log", required=True, help="ack log written by `lab produce`")
    p.add_argument(
        "--settle",
        type=float,
        default=10.0,
        help="seconds to wait for the HW to pass acknowledged offsets",
    )
