"""A synthetic Parquet state store shaped exactly like the Spark job's (no Spark involved).

Every row is the contract's row (``view_of(...).to_row()``) of a real model state: a few archetype
partitions (healthy, under-replicated, under min ISR, offline, an unclean election that
lost committed data) are played through :class:`~monitor.model.ClusterModel` for every
topic configuration (CP, min ISR 1, unclean elections enabled) and every broker triple,
one state row per phase; the store then holds, for each of ``partitions`` partitions, the
row of its archetype (with its topic and partition number), one batch folder per phase
(``state/batch_id=<n>/``), the findings of each phase (``findings/batch_id=<n>/``) and,
with ``compact_upto``, a snapshot (``streaming.store.compact``). Columns and types follow
``STATE_DDL`` / ``FINDING_DDL`` (:mod:`monitor.contract`, parsed here), the way Spark writes them.

Partition ``i`` is ``topic-{i // 100:05d}/{i % 100}``; its archetype is chosen by
``i % 1000`` (see :data:`MIX`) and its topic's configuration by the topic number (see
:func:`topic_config`). Broker ``brokers + 1`` is silent (an open broker-level
``stale_telemetry`` finding) and holds no replica.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from monitor.contract.events import parse_event, to_model
from monitor.contract.state import STATE_DDL, view_of
from monitor.contract.store import FINDING_DDL
from monitor.dev.testing import Timeline
from monitor.model import ClusterModel, Finding, FindingKind, FindingState, Severity
from monitor.model.state import TopicConfig

CLUSTER = "synth"
PER_TOPIC = 100
PHASE_MS = 10_000

# --- STATE_DDL -> Arrow schema ------------------------------------------------------------

_SCALARS = {
    "string": pa.string(),
    "int": pa.int32(),
    "long": pa.int64(),
    "boolean": pa.bool_(),
}


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside ``<...>``."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _type(text: str) -> pa.DataType:
    text = text.strip()
    if text in _SCALARS:
        return _SCALARS[text]
    m = re.fullmatch(r"array<(.*)>", text, flags=re.S)
    if m:
        return pa.list_(_type(m.group(1)))
    m = re.fullmatch(r"struct<(.*)>", text, flags=re.S)
    if m:
        return pa.struct([_field(f, ":") for f in _split_top(m.group(1))])
    raise ValueError(f"unsupported DDL type {text!r}")


def _field(text: str, sep: str = " ") -> pa.Field:
    name, _, typ = text.strip().partition(sep)
    return pa.field(name.strip(), _type(typ))


def arrow_schema(ddl: str) -> pa.Schema:
    """A Spark DDL string (``name type, ...``) as an Arrow schema."""
    return pa.schema([_field(f) for f in _split_top(ddl)])


#: What Spark writes: the STATE_DDL columns, then the operator's ``row_seq`` (the batch id
#: is the folder). Synthetic rows leave ``row_seq`` null (one row per partition per batch).
STATE_SCHEMA = arrow_schema(STATE_DDL).append(pa.field("row_seq", pa.int64()))
FINDING_SCHEMA = arrow_schema(FINDING_DDL)

# --- archetypes --------------------------------------------------------------------------

CONFIGS: dict[str, TopicConfig] = {
    "cp": TopicConfig(3, 2, False),
    "min_isr_1": TopicConfig(3, 1, False),
    "unclean_enabled": TopicConfig(3, 2, True),
}


def topic_config(topic_no: int) -> str:
    """Topic ``n``'s configuration: every 50th topic has min ISR 1, the next one unclean on."""
    return {7: "min_isr_1", 8: "unclean_enabled"}.get(topic_no % 50, "cp")


#: ``i % 1000`` -> archetype (the rest is healthy).
MIX: dict[str, range] = {
    "offline": range(1, 2),
    "unclean_loss": range(2, 3),
    "under_min_isr": range(3, 8),
    "under_replicated": range(8, 21),
}


def archetype(i: int) -> str:
    r = i % 1000
    for name, rng in MIX.items():
        if r in rng:
            return name
    return "healthy"


ARCHETYPES = ["healthy", *MIX]


def _phase(tl: Timeline, arch: str, phase: int, a: int, b: int, c: int) -> None:
    """Events of one phase (10 s) of an archetype; phase 0 is a healthy start."""
    hw = 1000 + 1000 * min(phase, 1)
    if phase == 0 or arch == "healthy":
        for r in (a, b, c):
            tl.replica(r, leo=hw)
        tl.meta(leader=a, epoch=5, replicas=[a, b, c], isr=[a, b, c], hw=hw)
        return
    if arch == "under_replicated":
        tl.replica(a, leo=2000)
        tl.replica(b, leo=2000)
        tl.replica(c, leo=1000)
        tl.meta(leader=a, epoch=5, replicas=[a, b, c], isr=[a, b], hw=2000)
        return
    if arch == "under_min_isr" or phase == 1:
        tl.replica(a, leo=2000)
        tl.replica(b, leo=1000)
        tl.replica(c, leo=1000)
        tl.meta(leader=a, epoch=5, replicas=[a, b, c], isr=[a], hw=2000)
        return
    if arch == "offline" or phase == 2:
        tl.replica(b, leo=1000)
        tl.replica(c, leo=1000)
        tl.meta(leader=None, epoch=6, replicas=[a, b, c], isr=[a], hw=2000)
        return
    # unclean_loss, phase >= 3: the lagging c is elected uncleanly; 1000 committed offsets go
    tl.replica(c, leo=1000)
    tl.meta(leader=c, epoch=7, replicas=[a, b, c], isr=[c], hw=1000, epoch_start=1000)


@dataclass
class Template:
    """One archetype x config x broker triple: its state row and findings per phase."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    findings: list[list[Finding]] = field(default_factory=list)


def _play(
    arch: str, config: str, triple: tuple[int, int, int], phases: int, start: int
) -> Template:
    cfg = CONFIGS[config]
    tl = Timeline(cluster=CLUSTER, topic="t", start=start)
    tl.config(cfg.replication_factor, cfg.min_insync_replicas, cfg.unclean_leader_election_enable)
    model = ClusterModel()
    out = Template()
    done = 0
    for phase in range(phases):
        _phase(tl, arch, phase, *triple)
        found: list[Finding] = []
        for ev in tl.events[done:]:
            found.extend(model.apply(to_model(parse_event(json.dumps(ev)))))
        done = len(tl.events)
        ts = model.topics[(CLUSTER, "t")]
        out.rows.append(view_of(model.partitions[(CLUSTER, "t", 0)], ts.config).to_row())
        out.findings.append(found)
        tl.advance(PHASE_MS)
    return out


def _add(col: Any, delta: pa.Array) -> Any:
    return pc.cast(pc.add(col, pc.cast(delta, pa.int64())), col.type)


def _vary_list(col: Any, delta: pa.Array, fields: set[str]) -> pa.Array:
    """Add ``delta[row]`` to the named struct fields of every element of a list column."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    flat = arr.flatten()
    per_elem = pc.take(delta, pc.list_parent_indices(arr))
    children = []
    for i, f in enumerate(flat.type):
        child = flat.field(i)
        if f.name in fields:
            child = _add(child, per_elem)
        children.append(child)
    struct = pa.StructArray.from_arrays(children, fields=list(flat.type))
    return pa.ListArray.from_arrays(arr.offsets, struct)


def _vary(table: pa.Table, shift: pa.Array, jitter: pa.Array) -> pa.Table:
    def put(name: str, col: Any) -> None:
        nonlocal table
        table = table.set_column(STATE_SCHEMA.get_field_index(name), name, col)

    for name in ("high_watermark", "max_committed_hw", "leader_leo"):
        put(name, _add(table[name], shift))
    put("updated_at", _add(table["updated_at"], jitter))
    put(
        "replica_states",
        _vary_list(table["replica_states"], shift, {"leo"}),
    )
    put(
        "replica_states",
        _vary_list(table["replica_states"], jitter, {"observed_at"}),
    )
    return table


def triple_of(i: int, brokers: int) -> tuple[int, int, int]:
    k = i % brokers
    return (k + 1, (k + 1) % brokers + 1, (k + 2) % brokers + 1)


# --- the store ---------------------------------------------------------------------------


@dataclass
class SyntheticStore:
    root: Path
    partitions: int
    brokers: int
    phases: int
    silent_broker: int
    #: archetype -> number of partitions of that archetype.
    counts: dict[str, int]
    #: configuration name -> topics with it.
    topics_by_config: dict[str, list[str]]
    newest_updated_at: int
    seconds: float


def write_store(
    root: Path,
    partitions: int = 100_000,
    *,
    brokers: int = 12,
    phases: int = 4,
    compact_upto: int | None = None,
    start: int | None = None,
    progress: Callable[[str], None] = lambda s: None,
) -> SyntheticStore:
    """Write the store under ``root``; ``start`` (ms) defaults to ``now - phases * 10 s``."""
    t0 = time.perf_counter()
    start = start if start is not None else int(time.time() * 1000) - phases * PHASE_MS
    phases = max(phases, 4)  # the unclean election needs 4 phases to play out
    n_topics = -(-partitions // PER_TOPIC)
    combos: list[tuple[str, str, tuple[int, int, int]]] = []
    index: dict[tuple[str, str, tuple[int, int, int]], int] = {}
    templates: list[Template] = []
    combo_of = pa.array([_combo(i, brokers, index, combos) for i in range(partitions)], pa.int32())
    for arch, config, triple in combos:
        templates.append(_play(arch, config, triple, phases, start))
    progress(f"{len(templates)} archetype runs")
    topics = pa.array([f"topic-{i // PER_TOPIC:05d}" for i in range(partitions)], pa.string())
    numbers = pa.array([i % PER_TOPIC for i in range(partitions)], pa.int32())
    # Healthy partitions (no finding whose details would have to agree) get their own
    # offsets and sampling times, so the files compress like real ones.
    healthy = [archetype(i) == "healthy" for i in range(partitions)]
    shift = pa.array([(i * 7919) % 1_000_000 if h else 0 for i, h in enumerate(healthy)])
    jitter = pa.array([i % 997 if h else 0 for i, h in enumerate(healthy)])
    newest = -1
    for phase in range(phases):
        tmpl = pa.Table.from_pylist([t.rows[phase] for t in templates], schema=STATE_SCHEMA)
        table = tmpl.take(combo_of)
        table = table.set_column(STATE_SCHEMA.get_field_index("topic"), "topic", topics)
        table = table.set_column(STATE_SCHEMA.get_field_index("partition"), "partition", numbers)
        table = _vary(table, shift, jitter)
        newest = max(newest, pc.max(table["updated_at"]).as_py())
        folder = root / "state" / f"batch_id={phase}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, folder / "part-00000.parquet")
        _write_findings(root, phase, templates, combo_of.to_pylist(), partitions, brokers)
        progress(f"batch {phase}: {table.num_rows} state rows")
    if compact_upto is not None:
        from streaming.store import compact

        compact(str(root), compact_upto)
        progress(f"compacted batches <= {compact_upto}")
    counts: dict[str, int] = {}
    for i in range(partitions):
        counts[archetype(i)] = counts.get(archetype(i), 0) + 1
    by_config: dict[str, list[str]] = {}
    for t in range(n_topics):
        by_config.setdefault(topic_config(t), []).append(f"topic-{t:05d}")
    return SyntheticStore(
        root,
        partitions,
        brokers,
        phases,
        brokers + 1,
        counts,
        by_config,
        newest,
        time.perf_counter() - t0,
    )


def _combo(
    i: int,
    brokers: int,
    index: dict[tuple[str, str, tuple[int, int, int]], int],
    combos: list[tuple[str, str, tuple[int, int, int]]],
) -> int:
    key = (archetype(i), topic_config(i // PER_TOPIC), triple_of(i, brokers))
    n = index.get(key)
    if n is None:
        n = index[key] = len(combos)
        combos.append(key)
    return n


def _finding_row(f: Finding, topic: str | None, partition: int | None) -> dict[str, Any]:
    g = Finding(
        f.kind,
        f.state,
        f.severity,
        f.cluster,
        topic,
        partition,
        f.at,
        f.opened_at,
        f.broker,
        f.details,
    )
    d = g.to_dict()
    d["details"] = json.dumps(d["details"], separators=(",", ":"))
    return d


def _write_findings(
    root: Path,
    phase: int,
    templates: Sequence[Template],
    combo_of: Sequence[int],
    partitions: int,
    brokers: int,
) -> None:
    rows: dict[str, dict[str, Any]] = {}
    for i in range(partitions):
        found = templates[combo_of[i]].findings[phase]
        if not found:
            continue
        topic, number = f"topic-{i // PER_TOPIC:05d}", i % PER_TOPIC
        for f in found:
            d = _finding_row(f, topic, None if f.partition is None else number)
            rows[d["id"]] = d
    if phase == 0:
        # a broker that stopped answering: one open broker-level stale_telemetry finding
        any_t = next(t for t in templates if t.rows)
        at = int(any_t.rows[0]["updated_at"])
        silent = Finding(
            kind=FindingKind.STALE_TELEMETRY,
            state=FindingState.OPEN,
            severity=Severity.WARNING,
            cluster=CLUSTER,
            topic=None,
            partition=None,
            at=at,
            opened_at=at,
            broker=brokers + 1,
            details={"alive": False, "last_seen_at": at, "silent_for_ms": 0},
        )
        d = _finding_row(silent, None, None)
        rows[d["id"]] = d
    if not rows:
        return
    folder = root / "findings" / f"batch_id={phase}"
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(list(rows.values()), schema=FINDING_SCHEMA)
    pq.write_table(table, folder / "part-00000.parquet")
