"""The monitor's own topics on its cluster, and what the principal may do with them and with
the watched cluster -- read from the brokers (Metadata's authorized operations, KIP-430;
DescribeConfigs), never by trying a write.

Each problem is one line saying what to do: the ``kafka-topics.sh`` that creates a missing
topic (or ``--create-topics``), the ``kafka-acls.sh`` that grants a missing permission, the
``kafka-configs.sh`` that mends a setting.
"""

from __future__ import annotations

import base64
import json
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import KafkaError, for_code

from monitor.connection import KafkaConnection
from monitor.contract.topics import (
    SPECS,
    Described,
    Role,
    create_command,
    problems,
    replication_factor,
)
from monitor.preflight.report import Report

#: Kafka's error codes the checks tell apart (kafka.errors).
UNKNOWN_TOPIC = 3
TOPIC_AUTHORIZATION_FAILED = 29

#: What each operation is called in ``kafka-acls.sh --operation``.
ACL_NAMES = {
    "READ": "Read",
    "WRITE": "Write",
    "DESCRIBE": "Describe",
    "DESCRIBE_CONFIGS": "DescribeConfigs",
    "CREATE": "Create",
}


#: MSK's IAM actions for each operation (with IAM, policies decide, not Kafka ACLs).
IAM_ACTIONS = {
    "READ": "kafka-cluster:ReadData",
    "WRITE": "kafka-cluster:WriteData",
    "DESCRIBE": "kafka-cluster:DescribeTopic",
    "DESCRIBE_CONFIGS": "kafka-cluster:DescribeTopicDynamicConfiguration",
}


@dataclass(frozen=True)
class Need:
    """A topic a command uses, and what it does with it."""

    role: Role
    name: str
    #: The operations it needs (``READ``, ``WRITE``: Describe comes with either).
    ops: tuple[str, ...]
    #: Who needs them, for the line: ``the collector``, ``the job``.
    who: str


def principal(conn: KafkaConnection) -> str:
    """The principal ``conn`` authenticates as, as ``kafka-acls.sh`` names it.

    >>> principal(KafkaConnection(bootstrap_servers="b:1"))
    'User:ANONYMOUS'
    """
    if conn.sasl_mechanism == "OAUTHBEARER" and conn.security_protocol.startswith("SASL_"):
        return f"User:{_token_subject(conn) or '<the token subject (sub)>'}"
    if conn.security_protocol.startswith("SASL_") and conn.sasl_username:
        return f"User:{conn.sasl_username}"
    if conn.ssl_certfile:
        return f"User:{_certificate_subject(conn.ssl_certfile) or '<the certificate subject>'}"
    if conn.ssl_keystore_location:
        return "User:<the client certificate's distinguished name>"
    return "User:ANONYMOUS"


#: X.500 attribute names as Kafka's default principal (RFC 2253) spells them.
_RDN = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
        "localityName": "L", "stateOrProvinceName": "ST", "countryName": "C"}  # fmt: skip


def _certificate_subject(path: str) -> str | None:
    """A PEM certificate's subject as Kafka names an SSL client by default (``CN=monitor``,
    most specific first), or None if it cannot be read."""
    import ssl

    try:
        decoded = ssl._ssl._test_decode_cert(path)  # type: ignore[attr-defined]
    except (OSError, ssl.SSLError, ValueError):
        return None
    parts = [f"{_RDN.get(k, k)}={v}" for rdn in decoded.get("subject", ()) for k, v in rdn]
    return ",".join(reversed(parts)) or None


def _token_subject(conn: KafkaConnection) -> str | None:
    """The ``sub`` claim of the token file's JWT (read, not verified: it only names the
    principal in a line), if there is one."""
    if conn.sasl_oauth_token_file is None:
        return None
    try:
        payload = Path(conn.sasl_oauth_token_file).read_text().strip().split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (OSError, IndexError, ValueError):
        return None
    sub = claims.get("sub") if isinstance(claims, dict) else None
    return str(sub) if sub else None


def grant(conn: KafkaConnection, ops: Iterable[str], *, topic: str | None = None) -> str:
    """How to give the principal ``ops``: a ``kafka-acls.sh`` line, or on MSK with IAM the
    policy's actions (IAM, not Kafka ACLs, decides there)."""
    if conn.sasl_mechanism == "AWS_MSK_IAM":
        wanted = ", ".join(IAM_ACTIONS.get(op, op) for op in ops)
        where = f"the topic {topic}" if topic else "the cluster"
        return f"allow {wanted} on {where} in the role's IAM policy"
    return f"grant it: {acl_command(conn, ops, topic=topic)}"


def acl_command(conn: KafkaConnection, ops: Iterable[str], *, topic: str | None = None) -> str:
    """The ``kafka-acls.sh`` line that allows ``ops`` on ``topic`` (or on the cluster).

    >>> conn = KafkaConnection(bootstrap_servers="m:9093", security_protocol="SASL_SSL",
    ...     sasl_mechanism="PLAIN", sasl_username="krm", sasl_password="x")
    >>> print(acl_command(conn, ["WRITE"], topic="e"))  # doctest: +NORMALIZE_WHITESPACE
    kafka-acls.sh --bootstrap-server m:9093 --command-config admin.properties --add
      --allow-principal User:krm --operation Write --topic e
    """
    parts = ["kafka-acls.sh", "--bootstrap-server", conn.bootstrap_servers]
    if conn.security_protocol != "PLAINTEXT":
        parts += ["--command-config", "admin.properties"]
    parts += ["--add", "--allow-principal", principal(conn)]
    for op in ops:
        parts += ["--operation", ACL_NAMES.get(op, op.title())]
    parts += ["--topic", topic] if topic is not None else ["--cluster"]
    return shlex.join(parts)


def _error_name(code: int) -> str:
    return str(for_code(code).__name__)


def _configs(admin: Any, name: str) -> dict[str, str]:
    keys = ["cleanup.policy", "unclean.leader.election.enable", "min.insync.replicas"]
    keys.append("retention.ms")
    resource = ConfigResource(ConfigResourceType.TOPIC, name, configs=dict.fromkeys(keys))
    entries = admin.describe_configs([resource], config_filter="all").get("topic", {}).get(name, {})
    return {k: str(v["value"]) for k, v in entries.items() if v.get("value") is not None}


def _brokers(admin: Any) -> int:
    return len(admin.describe_cluster().get("brokers", []))


def check_topics(
    admin: Any,
    report: Report,
    conn: KafkaConnection,
    needs: Sequence[Need],
    *,
    create: bool,
    command: str,
) -> None:
    """Each topic of ``needs`` on the cluster ``admin`` talks to: present (or created, with
    ``create``), its settings fit for its role, and the principal allowed its ``ops``.
    ``command``: the check's own command line, for the line that says to add
    ``--create-topics``."""
    try:
        brokers = _brokers(admin)
    except KafkaError as e:
        report.fail("monitor's cluster", f"describing it: {e!r}", "is it reachable? (above)")
        return
    for need in needs:
        spec = SPECS[need.role]
        what = f"{need.role} topic {need.name}"
        try:
            (described,) = admin.describe_topics([need.name])
        except KafkaError as e:
            report.fail(what, f"describing it: {e!r}")
            continue
        code = described.get("error_code", 0)
        if code == UNKNOWN_TOPIC:
            _missing(admin, report, conn, need, brokers, create, command)
            continue
        if code == TOPIC_AUTHORIZATION_FAILED:
            report.fail(
                what,
                f"{principal(conn)} may not even Describe it (it may be missing too)",
                grant(conn, need.ops, topic=need.name),
            )
            continue
        if code:
            report.fail(what, f"the brokers answer {_error_name(code)}")
            continue
        partitions = described.get("partitions", [])
        rf = max((len(p.get("replica_nodes", [])) for p in partitions), default=0)
        allowed = described.get("authorized_operations")
        denied = [op for op in need.ops if allowed is not None and op not in allowed]
        if denied:
            ops = " or ".join(ACL_NAMES[op] for op in denied)
            report.fail(
                what,
                f"{need.who} may not {ops} it (as {principal(conn)})",
                grant(conn, denied, topic=need.name),
            )
            continue
        try:
            configs = _configs(admin, need.name)
        except KafkaError as e:
            report.fail(what, f"reading its settings: {e!r}", "grant DescribeConfigs on it")
            continue
        wrong = problems(spec, Described(need.name, len(partitions), rf, configs))
        if wrong:
            fix = ",".join(f"{k}={v}" for k, v in spec.configs(rf).items() if k in spec.required)
            mend = [
                "kafka-configs.sh", "--bootstrap-server", conn.bootstrap_servers, "--alter",
                "--entity-type", "topics", "--entity-name", need.name, "--add-config", fix,
            ]  # fmt: skip
            report.fail(what, "; ".join(wrong), f"mend it: {shlex.join(mend)}")
            continue
        allowed_text = (
            f", {' and '.join(ACL_NAMES[o] for o in need.ops)} allowed"
            if allowed is not None
            else ", permissions not reported by the brokers"
        )
        report.ok(
            what,
            f"{len(partitions)} partition(s), replication factor {rf}, min.insync.replicas "
            f"{configs.get('min.insync.replicas', '?')}, retention.ms "
            f"{configs.get('retention.ms', '?')}{allowed_text}",
        )


def _missing(
    admin: Any,
    report: Report,
    conn: KafkaConnection,
    need: Need,
    brokers: int,
    create: bool,
    command: str,
) -> None:
    spec = SPECS[need.role]
    what = f"{need.role} topic {need.name}"
    by_hand = create_command(spec, need.name, conn.bootstrap_servers, brokers)
    if not create:
        report.fail(
            what,
            f"missing on {conn.bootstrap_servers}",
            f"create it: `{command} --create-topics`, or `{by_hand}`",
        )
        return
    rf = replication_factor(brokers)
    request = {
        need.name: {
            "num_partitions": spec.partitions,
            "replication_factor": rf,
            "configs": spec.configs(rf),
        }
    }
    try:
        # wait_for_metadata: a client asking right after (the live view, the job's source)
        # finds it with its partitions led.
        answer = admin.create_topics(request, raise_errors=False, wait_for_metadata=True)
    except KafkaError as e:
        report.fail(what, f"creating it: {e!r}", f"create it as an admin: `{by_hand}`")
        return
    code = next((t.get("error_code", 0) for t in answer.get("topics", [])), 0)
    if code:
        report.fail(
            what,
            f"could not create it: {_error_name(code)}",
            f"create it as an admin: `{by_hand}`",
        )
        return
    report.ok(
        what,
        f"created: {spec.partitions} partition(s), replication factor {rf}, "
        + ", ".join(f"{k}={v}" for k, v in spec.configs(rf).items()),
    )


def check_watched_access(admin: Any, report: Report, conn: KafkaConnection) -> None:
    """What the collector asks of the watched cluster, besides Describe on each topic
    (a topic it may not Describe is left out of the answer: it cannot be named):
    Describe on the cluster (running reassignments) and DescribeConfigs on the topics
    (their ``min.insync.replicas`` and ``unclean.leader.election.enable``)."""
    try:
        cluster_ops = admin.describe_cluster().get("authorized_operations")
        topics = admin.describe_topics()
    except KafkaError as e:
        report.fail("kafka permissions", f"reading them: {e!r}")
        return
    if cluster_ops is not None and "DESCRIBE" not in cluster_ops:
        report.fail(
            "kafka permissions",
            f"{principal(conn)} may not Describe the cluster: running reassignments are not "
            "read (a move would look like under-replication)",
            grant(conn, ["DESCRIBE"]),
        )
    blind = sorted(
        t["name"]
        for t in topics
        if t.get("authorized_operations") is not None
        and "DESCRIBE_CONFIGS" not in t["authorized_operations"]
        and not t["name"].startswith("__replication_monitor_")
    )
    if blind:
        shown = ", ".join(blind[:5]) + (f" and {len(blind) - 5} more" if len(blind) > 5 else "")
        report.fail(
            "kafka permissions",
            f"{principal(conn)} may not DescribeConfigs {len(blind)} topic(s) ({shown}): their "
            "min.insync.replicas is unknown, so under_min_isr cannot be judged on them",
            grant(conn, ["DESCRIBE", "DESCRIBE_CONFIGS"], topic="*"),
        )
    if (cluster_ops is None or "DESCRIBE" in cluster_ops) and not blind:
        report.ok(
            "kafka permissions",
            f"Describe on the cluster and DescribeConfigs on its {len(topics)} topic(s) "
            f"visible to {principal(conn)}"
            + ("" if cluster_ops is not None else " (the brokers report no permissions)"),
        )
