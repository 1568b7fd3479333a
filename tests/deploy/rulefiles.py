"""Read the project's Prometheus rule files, runbook and docs without a YAML library.

The venv has no PyYAML, so this reads the small YAML subset our rule files use: one
rule per ``- alert:``/``- record:`` item, keys ``expr``/``for``/``labels``/
``annotations`` two spaces deeper, sub-keys two more, and scalars that are plain,
'single-quoted', "double-quoted", ``|`` literal or ``>-`` folded. test_rules.py checks
that the number of rules found here equals what promtool itself parses, so a rule this
reader misses cannot go unnoticed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from monitor.assets.rules import PREFIX


def key(alert: str) -> str:
    """The snake_case key of an alert -- the finding kind it is named after (or a monitor or
    witness alert's own name), its runbook anchor: ``KafkaReplicationUnderMinIsr`` ->
    ``under_min_isr`` (the inverse of :func:`monitor.assets.rules.alert_name`)."""
    body = alert.removeprefix(PREFIX)
    return re.sub(r"(?<!^)([A-Z])", r"_\1", body).lower()


_RULE_START = re.compile(r"^(?P<indent> *)- (?P<type>alert|record): (?P<name>\S+)\s*$")
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w-]*):(?: (?P<value>.*))?$")


@dataclass
class Rule:
    type: str  # "alert" or "record"
    name: str
    path: Path
    line: int  # 1-based line of the "- alert:" item
    expr: str = ""
    for_: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def where(self) -> str:
        return f"{self.path.name}:{self.line} ({self.type} {self.name})"


def _is_blank_or_comment(line: str) -> bool:
    s = line.strip()
    return not s or s.startswith("#")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _scalar(value: str, continuation: list[str]) -> str:
    """The value of a scalar that starts with ``value`` on the key's line."""
    v = value.strip()
    if v in ("|", "|-", "|+"):
        text = "\n".join(c.strip() for c in continuation)
        return text if v == "|-" else text + "\n"
    if v in (">", ">-", ">+"):
        return " ".join(c.strip() for c in continuation if c.strip())
    if v.startswith("'") and v.endswith("'") and len(v) >= 2:
        return v[1:-1].replace("''", "'")
    if v.startswith('"') and v.endswith('"') and len(v) >= 2:
        return bytes(v[1:-1], "utf-8").decode("unicode_escape")
    # A plain scalar: drop a trailing " # comment".
    return re.sub(r"\s+#.*$", "", v)


def _mapping(lines: list[str]) -> dict[str, tuple[str, list[str]]]:
    """Top-level keys of an indented block -> (value on the key line, deeper lines)."""
    content = [ln for ln in lines if not _is_blank_or_comment(ln)]
    if not content:
        return {}
    base = min(_indent(ln) for ln in content)
    out: dict[str, tuple[str, list[str]]] = {}
    current: str | None = None
    for ln in lines:
        if _is_blank_or_comment(ln):
            if current is not None and ln.strip() == "":
                out[current][1].append(ln)
            continue
        m = _KEY.match(ln)
        if m and _indent(ln) == base:
            current = m["key"]
            out[current] = (m["value"] or "", [])
        elif current is not None:
            out[current][1].append(ln)
    return out


def scan_rules(path: Path) -> list[Rule]:
    lines = path.read_text().splitlines()
    starts = [(i, m) for i, ln in enumerate(lines) if (m := _RULE_START.match(ln))]
    rules: list[Rule] = []
    for n, (i, m) in enumerate(starts):
        indent = len(m["indent"])
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        # A shallower line (the next group's "- name:") also ends the rule.
        for j in range(i + 1, end):
            if not _is_blank_or_comment(lines[j]) and _indent(lines[j]) <= indent:
                end = j
                break
        rule = Rule(m["type"], m["name"], path, i + 1)
        for key, (value, deeper) in _mapping(lines[i + 1 : end]).items():
            if key == "expr":
                rule.expr = _scalar(value, deeper).strip()
            elif key == "for":
                rule.for_ = _scalar(value, deeper)
            elif key in ("labels", "annotations"):
                sub = {k: _scalar(v, d) for k, (v, d) in _mapping(deeper).items()}
                setattr(rule, key, sub)
        rules.append(rule)
    return rules


def scan_rule_dir(directory: Path) -> list[Rule]:
    return [r for p in sorted(directory.glob("*.yml")) for r in scan_rules(p)]


# -- docs ------------------------------------------------------------------------------


def finding_kinds(findings_md: Path) -> dict[str, str]:
    """kind -> default severity, from the table of docs/findings.md."""
    kinds: dict[str, str] = {}
    for ln in findings_md.read_text().splitlines():
        m = re.match(
            r"^\|\s*`(?P<kind>[a-z_]+)`\s*\|[^|]*\|\s*(?P<sev>info|warning|critical)\s*\|", ln
        )
        if m:
            kinds[m["kind"]] = m["sev"]
    return kinds


def documented_metrics(metrics_md: Path) -> set[str]:
    return set(re.findall(r"\bkafka_replication_\w+", metrics_md.read_text()))


def _outside_fences(text: str) -> list[str]:
    out, fenced = [], False
    for ln in text.splitlines():
        if ln.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append(ln)
    return out


def github_anchor(heading: str) -> str:
    """The anchor GitHub generates for a Markdown heading's text."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)  # keeps letters, digits, "_" and "-"
    return s.replace(" ", "-")


def heading_anchors(markdown: Path) -> list[str]:
    """Anchors of all headings, with GitHub's -1, -2 suffixes for repeats."""
    seen: dict[str, int] = {}
    anchors = []
    for ln in _outside_fences(markdown.read_text()):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", ln)
        if not m:
            continue
        base = github_anchor(m[1])
        n = seen.get(base, 0)
        seen[base] = n + 1
        anchors.append(base if n == 0 else f"{base}-{n}")
    return anchors


def h2_sections(markdown: Path) -> dict[str, str]:
    """``## heading`` -> the section's text (up to the next ``## ``)."""
    sections: dict[str, str] = {}
    current: str | None = None
    fenced = False
    for ln in markdown.read_text().splitlines():
        if ln.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and ln.startswith("## "):
            current = ln[3:].strip()
            sections[current] = ""
        elif current is not None:
            sections[current] += ln + "\n"
    return sections


def promql_blocks(markdown: Path) -> list[str]:
    return [
        b.strip()
        for b in re.findall(
            r"^```promql[ \t]*\n(.*?)^```[ \t]*$", markdown.read_text(), re.M | re.S
        )
    ]


# -- PromQL names ----------------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
# A number or duration ("900", "1.5e3", "10m", "1h30m") is one token, so that its unit
# letters are not taken for identifiers.
_TOKEN = re.compile(r"\d[\w.]*|[A-Za-z_:][A-Za-z0-9_:]*")


def promql_names(expr: str) -> set[str]:
    """Identifiers of a PromQL expression, string literals and numbers removed (metric
    names, label names, functions, keywords: callers filter)."""
    tokens = _TOKEN.findall(_STRING.sub('""', expr))
    return {t for t in tokens if not t[0].isdigit()}


def template_metric_names(text: str) -> set[str]:
    """kafka_replication_* names inside annotation templates (queries are in strings)."""
    return set(re.findall(r"\bkafka_replication_\w+", text))
