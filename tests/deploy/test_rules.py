"""The alerting rules, their unit tests, Alertmanager's config and the runbook, checked
with the real tools (promtool, amtool: ``-m prometheus``) and by pure-Python contract
tests (every alertable finding kind has a rule, every rule has severity / summary /
runbook_url, every runbook anchor exists, every metric name is documented).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from monitor import assets
from monitor.assets.rules import (
    DEFAULT_COLLECTOR_SELECTOR,
    DEFAULT_MONITOR_SELECTOR,
    DEFAULT_RUNBOOK_URL,
    alert_name,
    render,
)
from monitor.exporter.collector import EVENT_WINDOW_S
from monitor.query.sources import MONITOR_ALERT_KINDS
from tests.deploy.rulefiles import (
    Rule,
    documented_metrics,
    finding_kinds,
    h2_sections,
    heading_anchors,
    key,
    promql_blocks,
    promql_names,
    scan_rule_dir,
    template_metric_names,
)
from tests.promtools import (
    AM_CONFIG,
    FINDINGS_DOC,
    METRICS_DOC,
    PROM_CONFIG,
    RULE_TESTS_DIR,
    RULES_DIR,
    RUNBOOK,
    run_tool,
)

#: Finding kinds deliberately without an alert, and why. Every other kind of
#: docs/findings.md must have an alert named after it: a new kind fails this test until
#: someone decides.
NOT_ALERTED = {
    "isr_expand": "info: recovery, the end of an isr_shrink / under_replicated",
    "leader_election": "info: routine (restarts, preferred elections); leader_flapping and "
    "unclean_election are the alerts",
    "election_pending": "info: an election waiting for its evidence (seconds, usually); "
    "election_unverified is the alert if none comes",
    "topic_recreated": "info: routine churn (a topic deleted and recreated); the new "
    "incarnation's own findings are the alerts",
    "reassignment": "info: routine churn (a partition moving, its copy progress); "
    "under_replicated and follower_lag still alert on the original replicas",
}

#: The monitor's own alerts (not finding kinds).
MONITOR_ALERTS = MONITOR_ALERT_KINDS

#: Alerts on one witness of a finding kind, by alert name -> the kind (their ``kind``
#: label): the controller's counter says "unclean election" without a partition.
WITNESS_ALERTS = {"unclean_election_counted": "unclean_election"}

#: Roll-up alerts, by alert name -> the series they count: the partitions past the
#: exporter's per-partition limit. Their ``kind`` is the series' own (the finding kind), so
#: the rule sets none.
ROLLUP_ALERTS = {"partitions_capped": "kafka_replication_partitions_capped"}

SEVERITIES = {"critical", "warning", "info"}


def _words(text: str) -> set[str]:
    return set(text.split())


#: Identifiers in PromQL that are not metric names: aggregations, keywords and the
#: functions our rules and runbook use; label names.
PROMQL_WORDS = _words(
    """
    sum count max min avg topk bottomk by without on ignoring group_left group_right
    and or unless bool offset time absent rate increase deriv changes delta irate
    max_over_time min_over_time last_over_time count_over_time vector scalar
    clamp_min clamp_max abs label_replace histogram_quantile
    """
)
LABELS = _words("cluster topic partition broker kind severity job instance source le")

PROM_BUILTIN_METRICS = {"up"}


@pytest.fixture(scope="module")
def rules() -> list[Rule]:
    found = scan_rule_dir(RULES_DIR)
    assert found, f"no rules found in {RULES_DIR}"
    return found


@pytest.fixture(scope="module")
def alerts(rules: list[Rule]) -> list[Rule]:
    return [r for r in rules if r.type == "alert"]


# ====================================================================== real tools


@pytest.mark.prometheus
def test_promtool_check_config(promtool: str) -> None:
    out = run_tool([promtool, "check", "config", str(PROM_CONFIG)])
    print(out.stdout)
    assert "SUCCESS" in out.stdout


@pytest.mark.prometheus
def test_promtool_check_rules(promtool: str, rules: list[Rule]) -> None:
    files = sorted(RULES_DIR.glob("*.yml"))
    out = run_tool([promtool, "check", "rules", *map(str, files)])
    print(out.stdout)
    # Cross-check the pure-Python reader against promtool's own parser.
    counted = sum(int(n) for n in re.findall(r"SUCCESS: (\d+) rules found", out.stdout))
    assert counted == len(rules), (
        f"promtool parsed {counted} rules, tests/prometheus/rulefiles.py found {len(rules)}: "
        "the reader missed a rule (unusual YAML layout?)"
    )


@pytest.mark.prometheus
def test_promtool_unit_tests(promtool: str) -> None:
    files = sorted(RULE_TESTS_DIR.glob("*.yml"))
    assert files, f"no promtool unit tests in {RULE_TESTS_DIR}"
    out = run_tool([promtool, "test", "rules", *map(str, files)])
    print(out.stdout)
    assert "FAILED" not in out.stdout


@pytest.mark.prometheus
def test_amtool_check_config(amtool: str) -> None:
    out = run_tool([amtool, "check-config", str(AM_CONFIG)])
    print(out.stdout)
    assert "SUCCESS" in out.stdout


#: (alert labels, the receiver Alertmanager must route them to)
ROUTES = [
    (
        "alertname=KafkaReplicationUnderMinIsr severity=critical cluster=lab topic=orders "
        "partition=0",
        "kafka-replication-pager",
    ),
    (
        "alertname=KafkaReplicationMonitorDown severity=critical job=kafka-replication-monitor",
        "kafka-replication-pager",
    ),
    (
        "alertname=KafkaReplicationFollowerLag severity=warning cluster=lab topic=orders "
        "partition=0",
        "kafka-replication-tickets",
    ),
    (
        "alertname=KafkaReplicationDurabilityRisk severity=info cluster=lab topic=audit",
        "kafka-replication-null",
    ),
    # no severity: never dropped
    ("alertname=KafkaReplicationSomethingNew cluster=lab", "kafka-replication-tickets"),
    # another team's alerts keep their own route, critical or not: the merge takes none
    ("alertname=DiskFull severity=critical team=storage", "team-default"),
    ("alertname=under_min_isr severity=critical cluster=lab", "team-default"),
]


@pytest.mark.prometheus
@pytest.mark.parametrize(("labels", "receiver"), ROUTES)
def test_alertmanager_routes(amtool: str, labels: str, receiver: str) -> None:
    out = run_tool(
        [amtool, "config", "routes", "test", f"--config.file={AM_CONFIG}", *labels.split()]
    )
    assert out.stdout.split() == [receiver], out.stdout


@pytest.mark.prometheus
def test_rendered_config_is_valid(promtool: str, tmp_path: Path) -> None:
    """The e2e tests render prometheus.yml by plain string substitution: each placeholder
    occurs once, and the rendered copy (elsewhere, other ports) is still valid."""
    text = PROM_CONFIG.read_text()
    substitutions = {
        "127.0.0.1:9478": "127.0.0.1:19478",
        "127.0.0.1:9479": "127.0.0.1:19479",
        "127.0.0.1:9093": "127.0.0.1:19093",
        "rules/*.yml": str(RULES_DIR / "*.yml"),
    }
    body = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    for old, new in substitutions.items():
        assert body.count(old) == 1, f"{old!r} must occur exactly once outside comments"
        text = text.replace(old, new)
    rendered = tmp_path / "prometheus.yml"
    rendered.write_text(text)
    out = run_tool([promtool, "check", "config", str(rendered)])
    assert "2 rule files found" in out.stdout, out.stdout


@pytest.mark.prometheus
def test_runbook_promql_parses(promtool: str, tmp_path: Path) -> None:
    """Every ```promql block of the runbook is one valid PromQL expression (promtool
    parses each as a recording rule)."""
    blocks = promql_blocks(RUNBOOK)
    assert len(blocks) >= 40, f"only {len(blocks)} promql blocks in the runbook"
    lines = ["groups:", "  - name: runbook", "    rules:"]
    for i, expr in enumerate(blocks):
        lines.append(f"      - record: runbook:query_{i}")
        lines.append("        expr: |")
        lines.extend(f"          {ln}" for ln in expr.splitlines())
    rules_file = tmp_path / "runbook_queries.yml"
    rules_file.write_text("\n".join(lines) + "\n")
    out = run_tool([promtool, "check", "rules", str(rules_file)])
    assert f"SUCCESS: {len(blocks)} rules found" in out.stdout, out.stdout


@pytest.mark.prometheus
def test_tools_report_versions(promtool: str, amtool: str, alertmanager_bin: str) -> None:
    for tool in (promtool, amtool, alertmanager_bin):
        out = run_tool([tool, "--version"])
        print((out.stdout + out.stderr).splitlines()[0])


def test_missing_tool_fails_not_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.promtools import find_binary

    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match=r"promtool not found.*apt-get install"):
        find_binary("promtool")


# ====================================================================== pure Python


def test_every_alertable_finding_kind_has_an_alert(alerts: list[Rule]) -> None:
    kinds = finding_kinds(FINDINGS_DOC)
    assert len(kinds) >= 18, f"could not read the kinds table of {FINDINGS_DOC}: {kinds}"
    bad = [a.name for a in alerts if a.name != alert_name(key(a.name))]
    assert not bad, f"alert names not KafkaReplication + CamelCase of a snake_case key: {bad}"
    names = {key(a.name) for a in alerts}
    missing = set(kinds) - names - set(NOT_ALERTED)
    assert not missing, f"finding kinds without an alert (add a rule or NOT_ALERTED): {missing}"
    stale = set(NOT_ALERTED) - set(kinds)
    assert not stale, f"NOT_ALERTED names kinds findings.md no longer has: {stale}"
    both = set(NOT_ALERTED) & names
    assert not both, f"kinds both alerted and in NOT_ALERTED: {both}"
    for kind in NOT_ALERTED:
        assert kinds[kind] == "info", f"{kind} is {kinds[kind]} in findings.md: alert on it"
    unknown = names - set(kinds) - MONITOR_ALERTS - set(WITNESS_ALERTS) - set(ROLLUP_ALERTS)
    assert set(WITNESS_ALERTS.values()) <= set(kinds)
    assert not unknown, f"alerts that are neither finding kinds nor monitor alerts: {unknown}"


def test_every_alert_has_severity_kind_summary_description_runbook(alerts: list[Rule]) -> None:
    problems = []
    for a in alerts:
        sev = a.labels.get("severity")
        if sev not in SEVERITIES:
            problems.append(f"{a.where()}: severity {sev!r} not in {sorted(SEVERITIES)}")
        if key(a.name) in ROLLUP_ALERTS:
            if "kind" in a.labels or ROLLUP_ALERTS[key(a.name)] not in promql_names(a.expr):
                problems.append(f"{a.where()}: a roll-up alert takes kind from its series")
        elif a.labels.get("kind") != WITNESS_ALERTS.get(key(a.name), key(a.name)):
            problems.append(f"{a.where()}: label kind={a.labels.get('kind')!r} != alert's kind")
        for annotation in ("summary", "description", "runbook_url"):
            if not a.annotations.get(annotation, "").strip():
                problems.append(f"{a.where()}: no {annotation} annotation")
        url = a.annotations.get("runbook_url", "")
        if url != f"{DEFAULT_RUNBOOK_URL}#{key(a.name)}":
            problems.append(
                f"{a.where()}: runbook_url {url!r} != {DEFAULT_RUNBOOK_URL}#{key(a.name)}"
            )
        summary = a.annotations.get("summary", "")
        if a.labels.get("kind") not in MONITOR_ALERTS and "$labels.cluster" not in summary:
            problems.append(f"{a.where()}: summary does not name the cluster")
    assert not problems, "\n".join(problems)


def test_critical_findings_page_and_paging_matches_findings(alerts: list[Rule]) -> None:
    """An alert's severity may differ from the finding's (it is the routing decision), but
    a critical finding always pages: an alert of a critical kind that does not page
    selects that kind's findings the model lowered (``severity="warning"``: a follower's
    truncation_below_hw), and another alert of the kind pages the critical ones."""
    kinds = finding_kinds(FINDINGS_DOC)
    for a in alerts:
        if kinds.get(key(a.name)) != "critical" or a.labels["severity"] == "critical":
            continue
        assert 'severity="warning"' in a.expr, a.where()
        assert any(
            b.name == a.name
            and b.labels["severity"] == "critical"
            and 'severity="critical"' in b.expr
            for b in alerts
        ), a.where()


def test_one_off_findings_use_a_time_window_not_a_counter(rules: list[Rule]) -> None:
    """One-off alerts page for 900 s after the DETECTION (the exporter's wall clock), never
    on the event's own time: a loss detected late must page, a future stamp must not page
    for longer (the promtool tests show both)."""
    windowed = 0
    for r in rules:
        if r.type != "alert":
            continue
        names = promql_names(r.expr)
        assert not any(n.endswith("_total") for n in names), (
            f"{r.where()}: alerts must not use a cumulative counter: {r.expr}"
        )
        assert "kafka_replication_finding_last_event_timestamp_seconds" not in names, (
            f"{r.where()}: alerts page on the detection time, not the event time: {r.expr}"
        )
        if "kafka_replication_finding_last_detected_timestamp_seconds" in names:
            window = (  # optionally aggregated: min by (cluster) (time() - ...) < 900
                r"time\(\)\s*-\s*kafka_replication_finding_last_detected_timestamp_seconds"
                r"\{[^}]*\}\)?\s*<\s*(\d+)"
            )
            found = re.findall(window, r.expr)
            assert found, f"{r.where()}: {r.expr}"
            assert {int(w) for w in found} == {EVENT_WINDOW_S}, (
                f"{r.where()}: the window is the exporter's EVENT_WINDOW_S ({EVENT_WINDOW_S} s), "
                f"which ranks and rolls up the paging partitions: {r.expr}"
            )
            windowed += 1
    assert windowed >= 8, f"only {windowed} one-off alerts on the detection time"


def test_partitions_past_the_limit_page_and_ticket(alerts: list[Rule]) -> None:
    """The exporter counts the partitions past its limit per severity; each severity that
    pages or tickets per partition does so through the roll-up too, with the same
    routing severity."""
    rollup = [a for a in alerts if key(a.name) == "partitions_capped"]
    routed = {}
    for a in rollup:
        m = re.fullmatch(
            r'kafka_replication_partitions_capped\{severity="(\w+)"\} > 0', a.expr.strip()
        )
        assert m, f"{a.where()}: {a.expr}"
        routed[m[1]] = a.labels["severity"]
    assert routed == {"critical": "critical", "warning": "warning"}, routed


def test_runbook_has_a_section_for_every_alert(alerts: list[Rule]) -> None:
    anchors = heading_anchors(RUNBOOK)
    sections = h2_sections(RUNBOOK)
    for a in alerts:
        anchor = a.annotations["runbook_url"].rpartition("#")[2]
        assert anchor in anchors, f"{a.where()}: no heading with anchor #{anchor} in runbook.md"
        assert key(a.name) in sections, f"runbook.md has no '## {key(a.name)}' section"
        text = sections[key(a.name)]
        for part in (
            "**Meaning.**",
            "**Urgency.**",
            "**First queries.**",
            "**Decide.**",
            "**Fix.**",
        ):
            assert part in text, f"runbook section {a.name} lacks {part}"
        assert "```promql" in text, f"runbook section {a.name} has no promql query"
        assert re.search(r"^```\n.*?\n```$", text, re.M | re.S), (
            f"runbook section {a.name} has no diagram"
        )


def test_runbook_anchors_are_unique() -> None:
    anchors = heading_anchors(RUNBOOK)
    dupes = {a for a in anchors if anchors.count(a) > 1}
    assert not dupes, dupes


def test_metric_names_are_documented(rules: list[Rule]) -> None:
    documented = documented_metrics(METRICS_DOC)
    assert len(documented) > 20, f"could not read metric names from {METRICS_DOC}"
    recorded = {r.name for r in rules if r.type == "record"}
    problems = []
    for r in rules:
        names = promql_names(r.expr)
        for n in names:
            if n.startswith("kafka_replication_") and n not in documented:
                problems.append(f"{r.where()}: {n} is not in docs/metrics.md")
            elif ":" in n and n not in recorded:
                problems.append(f"{r.where()}: {n} is not a recording rule")
        unknown = names - PROMQL_WORDS - LABELS - PROM_BUILTIN_METRICS - documented - recorded
        if unknown:
            problems.append(f"{r.where()}: unknown identifiers {sorted(unknown)}")
        for text in r.annotations.values():
            for n in template_metric_names(text) - documented:
                problems.append(f"{r.where()}: annotation uses undocumented {n}")
        if r.type == "record":
            metric_part = r.name.split(":")[1] if r.name.count(":") == 2 else ""
            if not any(metric_part.startswith(d.removesuffix("_total")) for d in documented):
                problems.append(f"{r.where()}: name is not level:<documented metric>:ops")
    assert not problems, "\n".join(problems)


def test_runbook_queries_use_documented_metrics() -> None:
    documented = documented_metrics(METRICS_DOC)
    problems = []
    for expr in promql_blocks(RUNBOOK):
        names = promql_names(expr)
        for n in names:
            if n.startswith("kafka_replication_") and n not in documented:
                problems.append(f"{n} (in: {expr})")
            elif ":" in n:
                problems.append(f"recording rule {n} in the runbook: use raw metrics (in: {expr})")
        unknown = names - PROMQL_WORDS - LABELS - PROM_BUILTIN_METRICS - documented
        if unknown:
            problems.append(f"unknown identifiers {sorted(unknown)} in: {expr}")
    assert not problems, "\n".join(problems)


def _rule_test_items(path: Path) -> list[tuple[str, bool, bool]]:
    """(alertname, fires, has exp_annotations) for each alert_rule_test item."""
    items: list[tuple[str, bool, bool]] = []
    lines = path.read_text().splitlines()
    for i, ln in enumerate(lines):
        m = re.match(r"^(\s*)- \{?alertname: (\w+)", ln)
        if not m:
            continue
        if "{" in ln:  # flow style: {alertname: x, eval_time: y, exp_alerts: []}
            items.append((m[2], "exp_alerts: []" not in ln, False))
            continue
        indent = len(m[1])
        body = []
        for nxt in lines[i + 1 :]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            body.append(nxt)
        text = "\n".join(body)
        items.append((m[2], "exp_alerts: []" not in text, "exp_annotations:" in text))
    return items


def test_promtool_tests_cover_every_alert(alerts: list[Rule]) -> None:
    items = [it for p in sorted(RULE_TESTS_DIR.glob("*.yml")) for it in _rule_test_items(p)]
    problems = []
    for name in sorted({a.name for a in alerts}):
        mine = [it for it in items if it[0] == name]
        if not any(fires for _, fires, _ in mine):
            problems.append(f"{name}: no firing case")
        if not any(not fires for _, fires, _ in mine):
            problems.append(f"{name}: no non-firing case")
        if not any(ann for _, fires, ann in mine if fires):
            problems.append(f"{name}: no expected annotations")
    # Every alert with `for:` has a case just before it fires (non-firing) - checked by
    # the test files themselves; here: every rule with `for:` is justified by a comment.
    assert not problems, "\n".join(problems)


def test_every_for_is_justified() -> None:
    """Each `for:` in the alert rules has a comment above it (in the same rule) that names
    that very duration (``for 5m``) and says why: a `for:` changed without its reason, or
    a comment that merely contains the letters "for" ("before"), fails."""
    checked, problems = 0, []
    for path in sorted(RULES_DIR.glob("*.yml")):
        lines = path.read_text().splitlines()
        for i, ln in enumerate(lines):
            m = re.match(r"^\s+for: (\S+)\s*$", ln)
            if not m:
                continue
            checked += 1
            start = max(j for j in range(i) if re.match(r"^\s*- (alert|record): ", lines[j]))
            comment = " ".join(
                lines[j].strip().lstrip("#").strip()
                for j in range(start, i)
                if lines[j].lstrip().startswith("#")
            )
            where = f"{path.name}:{i + 1}: `for: {m.group(1)}`"
            if not re.search(rf"\bfor {re.escape(m.group(1))}\b", comment):
                problems.append(
                    f"{where}: no comment above it in the rule says `for {m.group(1)}` "
                    f"and why (comment: {comment!r})"
                )
            elif len(comment.split()) < 10:
                problems.append(f"{where}: {comment!r} does not say why")
    assert checked >= 10, f"only {checked} `for:` found in {RULES_DIR}"
    assert not problems, "\n".join(problems)


def test_alertmanager_receivers_are_local_placeholders() -> None:
    text = AM_CONFIG.read_text()
    urls = re.findall(r"url:\s*(\S+)", text)
    assert urls and all(u.startswith("http://127.0.0.1:9099/") for u in urls), urls
    for receiver in ("pager", "tickets", "null"):
        assert f"- name: kafka-replication-{receiver}" in text, receiver


def test_prometheus_config_jobs_and_paths() -> None:
    text = PROM_CONFIG.read_text()
    # The rules' default selectors select the example configuration's jobs.
    assert f"job_name: {DEFAULT_MONITOR_SELECTOR.split('=')[1].strip(chr(34))}" in text
    assert f"job_name: {DEFAULT_COLLECTOR_SELECTOR.split('=')[1].strip(chr(34))}" in text
    assert re.search(r"^\s+- rules/\*\.yml$", text, re.M)


# ====================================================================== fitting a stack


def test_example_alertmanager_config_merges_the_shipped_route_as_is() -> None:
    """deploy/alertmanager/alertmanager.yml is the snippet merged into a stack's config:
    its first route and its inhibitions are exactly the snippet's (they cannot drift)."""
    import yaml

    snippet = yaml.safe_load(assets.read_text("alertmanager/route.yml"))
    example = yaml.safe_load(AM_CONFIG.read_text())
    assert example["route"]["routes"][0] == snippet["route"]
    assert example["inhibit_rules"] == snippet["inhibit_rules"]
    # The route takes this monitor's alerts only: its matcher is the alert names' prefix.
    assert snippet["route"]["matchers"] == ['alertname=~"KafkaReplication.+"']
    for rule in snippet["inhibit_rules"]:
        for matcher in rule["source_matchers"] + rule["target_matchers"]:
            if matcher.startswith("alertname"):
                assert "KafkaReplication" in matcher, matcher


@pytest.mark.prometheus
def test_rules_rendered_for_a_stack_keep_no_default(promtool: str, tmp_path: Path) -> None:
    """`monitor assets rules` with a runbook URL and selectors: every runbook_url and every
    job selector of the files changes, nothing else does, and promtool takes the result."""
    values = {
        "runbook_url": "https://wiki.example.com/kafka/runbook",
        "monitor_selector": 'job="kmon-stream",namespace="kafka"',
        "collector_selector": 'job=~"kmon-collector-.*"',
    }
    from monitor.cli import main

    assert main(["assets", "rules", "--out", str(tmp_path),
                 "--runbook-url", values["runbook_url"],
                 "--monitor-selector", values["monitor_selector"],
                 "--collector-selector", values["collector_selector"]]) == 0  # fmt: skip
    written = sorted(tmp_path.glob("*.yml"))
    assert [p.name for p in written] == ["recording.yml", "replication.yml"]
    text = (tmp_path / "replication.yml").read_text()
    for default in (
        DEFAULT_RUNBOOK_URL + "#",
        DEFAULT_MONITOR_SELECTOR,
        DEFAULT_COLLECTOR_SELECTOR,
    ):
        assert default not in text, default
    rendered = scan_rule_dir(tmp_path)
    urls = [r.annotations["runbook_url"] for r in rendered if r.type == "alert"]
    assert urls and all(u == f"{values['runbook_url']}#{u.rpartition('#')[2]}" for u in urls)
    assert text.count("kmon-stream") == 3 and text.count("kmon-collector-") == 1, text
    shipped = (RULES_DIR / "replication.yml").read_text().splitlines()
    assert len(text.splitlines()) == len(shipped)
    defaults = (DEFAULT_RUNBOOK_URL, DEFAULT_MONITOR_SELECTOR, DEFAULT_COLLECTOR_SELECTOR)
    for before, after in zip(shipped, text.splitlines(), strict=True):
        assert before == after or any(d in before for d in defaults), (before, after)
    out = run_tool([promtool, "check", "rules", *map(str, written)])
    assert "SUCCESS" in out.stdout


def test_a_selector_with_braces_is_refused() -> None:
    with pytest.raises(ValueError, match="inside of a selector's braces"):
        render("x", monitor_selector='{job="x"}')
