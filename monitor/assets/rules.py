"""The shipped Prometheus rules, fitted to a stack: runbook address and scrape-job selectors.

The rule files (``prometheus/rules/*.yml``) are valid as shipped, with three defaults that a
real stack replaces -- the Helm chart with its values, a plain install with
``monitor assets rules``:

* every alert's ``runbook_url`` is ``<runbook URL>#<kind>`` (docs/runbook.md's anchors are
  the kinds); the default host is ``.invalid`` (RFC 6761): it resolves nowhere, on purpose;
* the monitor's health alerts select its scrape jobs by ``job="kafka-replication-monitor"``
  (the Spark job's driver, which serves the findings) and
  ``job="kafka-replication-collector"`` (the collector's own metrics).

Alert names share one prefix and are CamelCase (:func:`alert_name`); the finding kind is
the ``kind`` label of every alert, so routes and silences can match either.
"""

from __future__ import annotations

from monitor import assets

PREFIX = "KafkaReplication"
DEFAULT_RUNBOOK_URL = "https://kafka-replication-monitor.invalid/runbook"
DEFAULT_MONITOR_SELECTOR = 'job="kafka-replication-monitor"'
DEFAULT_COLLECTOR_SELECTOR = 'job="kafka-replication-collector"'

#: The rule files, by their asset name.
RULE_FILES = ("prometheus/rules/replication.yml", "prometheus/rules/recording.yml")


def alert_name(kind: str) -> str:
    """The alert for a finding kind (or one of the monitor's own: ``monitor_down``...).

    >>> alert_name("under_min_isr"), alert_name("monitor_down")
    ('KafkaReplicationUnderMinIsr', 'KafkaReplicationMonitorDown')
    """
    return PREFIX + "".join(part.capitalize() for part in kind.split("_"))


def render(
    text: str,
    *,
    runbook_url: str = DEFAULT_RUNBOOK_URL,
    monitor_selector: str = DEFAULT_MONITOR_SELECTOR,
    collector_selector: str = DEFAULT_COLLECTOR_SELECTOR,
) -> str:
    """A rule file's text with the given runbook base URL and job selectors.

    A selector is the inside of a PromQL selector's braces (``job="kmon",namespace="kafka"``).

    >>> render('up{job="kafka-replication-monitor"} runbook_url: '
    ...        'https://kafka-replication-monitor.invalid/runbook#offline',
    ...        runbook_url="https://wiki/kafka", monitor_selector='job=~"kmon-.*"')
    'up{job=~"kmon-.*"} runbook_url: https://wiki/kafka#offline'
    """
    for name, value in (("monitor_selector", monitor_selector),
                        ("collector_selector", collector_selector)):  # fmt: skip
        if not value.strip() or "{" in value or "}" in value:
            raise ValueError(f"{name} {value!r}: the inside of a selector's braces, "
                             'e.g. job="kafka-replication-monitor"')  # fmt: skip
    return (
        text.replace(DEFAULT_RUNBOOK_URL + "#", runbook_url.rstrip("#") + "#")
        .replace(DEFAULT_MONITOR_SELECTOR, monitor_selector)
        .replace(DEFAULT_COLLECTOR_SELECTOR, collector_selector)
    )


def rendered(**values: str) -> dict[str, str]:
    """Every shipped rule file, rendered: ``{file name: text}``."""
    return {name.rsplit("/", 1)[1]: render(assets.read_text(name), **values) for name in RULE_FILES}
