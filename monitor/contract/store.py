"""The state store's shape: where the job writes, what a row holds, which row is newest.

The Spark job writes the store (``streaming/store.py``); the runbook CLI and the exporter
read it (:mod:`monitor.query.store`). Both take the layout from here::

    state/batch_id=<n>/part-*.parquet      the touched partitions' rows after batch n
                                           (:data:`~monitor.contract.state.STATE_DDL`)
    findings/batch_id=<n>/part-*.parquet   the findings of batch n (:data:`FINDING_DDL`)
    snapshot/state.parquet                 the newest row per partition up to the batch
    snapshot/snapshot.json                 named there (``{"upto_batch": n}``)

Each micro-batch writes its own ``batch_id=<n>`` folders, replacing them: a batch replayed
after a failure rewrites the same folders with the same rows, so the store is idempotent by
batch id. A partition's current state is its newest row (:data:`NEWEST_FIRST`); all its
rows are its history, for ``explain``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from monitor.contract.state import STATE_DDL
from monitor.model import STATE_ORDER

STATE = "state"
FINDINGS = "findings"
#: The store's half of its pairing with a checkpoint (``streaming.storefs.pair``):
#: ``{"pair": id, "since": ms}``, ``since`` being when the checkpoint now writing the store
#: began (0: not known -- a checkpoint from before the pairing). Events before it that the
#: job reports are history replayed from the events topic (a new checkpoint reads it from
#: the start): the exporter takes their event time for their detection, so a rebuild never
#: pages again for what the old job already paged.
STORE_PAIR = "_monitor_pair.json"
SNAPSHOT_FILE = "snapshot/state.parquet"
SNAPSHOT_MARK = "snapshot/snapshot.json"

#: Which of a partition's rows is the newest: the batch, then the order of the bucket's
#: calls within the batch (``streaming.operator.row_seq``: a timer row after an input row,
#: both with the same ``updated_at``), then ``updated_at`` for rows without ``row_seq``.
NEWEST_FIRST = "batch_id DESC, coalesce(row_seq, -1) DESC, updated_at DESC"

#: The findings table: :meth:`monitor.model.Finding.to_dict`'s keys, in its order, with
#: ``details`` as JSON text, then ``detected_at``: when the job detected the finding (wall
#: clock of the driver writing the batch, ms since the epoch). ``at`` is the event's own time,
#: which may be long before (a job outage, a backlog); the one-off alerts page on
#: ``detected_at``. Then ``seq``: the finding's place in the job's output
#: (:func:`finding_seq`), which is the order the model emitted it in. Rows written before a
#: column existed read it as NULL.
FINDING_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "string"),
    ("kind", "string"),
    ("state", "string"),
    ("severity", "string"),
    ("cluster", "string"),
    ("topic", "string"),
    ("partition", "int"),
    ("broker", "int"),
    ("at", "long"),
    ("opened_at", "long"),
    ("details", "string"),
    ("detected_at", "long"),
    ("seq", "long"),
)
FINDING_DDL = ", ".join(f"{name} {kind}" for name, kind in FINDING_COLUMNS)
#: The columns after the finding's own (:meth:`~monitor.model.Finding.to_dict`): added to the
#: table later, so older stores lack them -- their readers see NULL.
LATER_FINDING_COLUMNS = ("detected_at", "seq")
assert tuple(name for name, _ in FINDING_COLUMNS[-len(LATER_FINDING_COLUMNS) :]) == (
    LATER_FINDING_COLUMNS
)

#: A batch's findings, at most (:func:`finding_seq`).
_SEQ_BATCH = 1 << 32


def finding_seq(batch_id: int, position: int) -> int:
    """The ``seq`` of the finding at ``position`` in batch ``batch_id``'s output: grows with
    the batch, then with the place in it -- the order the model emitted the findings in
    (a condition's findings come from one bucket, in its order). It outlives the batch
    folder (compaction folds many into one).

    >>> finding_seq(0, 5) < finding_seq(1, 0) < finding_seq(1, 1)
    True
    """
    if not 0 <= position < _SEQ_BATCH:
        raise ValueError(f"finding position {position} outside 0..{_SEQ_BATCH - 1}")
    return batch_id * _SEQ_BATCH + position


#: The order findings are read back in, as SQL (``ORDER BY``): their ``seq`` -- the order
#: the job emitted them in, exact -- and for rows written before it (NULL: first, they are
#: older), the model's :func:`~monitor.model.finding_order` on their stamps, term for term.
#: The stamps alone cannot always give the order back: a tick's clock can go back (a
#: backlog's batch ticks at its newest event plus the catch-up slack), and a condition can
#: then open again at an instant before an earlier open and resolve.
_STAMP_TERMS = (
    '"at"',
    "opened_at",
    "CASE state "
    + " ".join(f"WHEN '{state}' THEN {rank}" for state, rank in STATE_ORDER.items())
    + " END",
    "id",
)
FINDINGS_IN_ORDER = ", ".join(("seq NULLS FIRST", *_STAMP_TERMS))
#: The reverse: the last finding first (a subject's current condition).
FINDINGS_NEWEST_FIRST = ", ".join(
    ("seq DESC NULLS LAST", *(f"{term} DESC" for term in _STAMP_TERMS))
)


#: What makes findings rows one finding (``PARTITION BY``; the first batch's row is kept):
#: the id -- a replayed batch, a rebuilt job's history and a compaction's folded copy
#: repeat it -- and, for a condition's open or resolve, its ``seq`` too: a condition opened
#: again at the instant of an earlier open repeats that open's id (the id hashes subject,
#: kind, state and stamps), and is a finding of its own. One-off events stay once per id
#: (the exporter's counters count each once).
FINDING_IDENTITY = "id, CASE WHEN state = 'event' THEN NULL ELSE seq END"


def finding_store_row(
    d: Mapping[str, Any], detected_at: int | None, seq: int | None
) -> tuple[Any, ...]:
    """A finding dict (:meth:`~monitor.model.Finding.to_dict`) as a findings-table row,
    detected at ``detected_at`` (ms since the epoch, wall clock), at ``seq`` in the job's
    output (:func:`finding_seq`; None only to write a row as stored before the column).

    >>> finding_store_row({"id": "x", "kind": "offline", "state": "open", "severity": "critical",
    ...              "cluster": "c", "topic": "t", "partition": 0, "broker": None,
    ...              "at": 5, "opened_at": 5, "details": {"epoch": 3}}, 9, 7)[-3:]
    ('{"epoch":3}', 9, 7)
    """
    import json

    values = [d[name] for name, _ in FINDING_COLUMNS[: -len(LATER_FINDING_COLUMNS)]]
    values[-1] = json.dumps(d["details"], separators=(",", ":"))  # details: last of the dict
    return (*values, detected_at, seq)


def finding_store_rows(
    findings: Sequence[Mapping[str, Any]], batch_id: int, detected_at: int | None
) -> list[tuple[Any, ...]]:
    """Batch ``batch_id``'s findings, in the order the job emitted them, as table rows."""
    return [
        finding_store_row(d, detected_at, finding_seq(batch_id, i)) for i, d in enumerate(findings)
    ]


__all__ = [
    "FINDINGS",
    "FINDINGS_IN_ORDER",
    "FINDINGS_NEWEST_FIRST",
    "FINDING_COLUMNS",
    "FINDING_DDL",
    "FINDING_IDENTITY",
    "LATER_FINDING_COLUMNS",
    "NEWEST_FIRST",
    "SNAPSHOT_FILE",
    "SNAPSHOT_MARK",
    "STATE",
    "STATE_DDL",
    "STORE_PAIR",
    "finding_seq",
    "finding_store_row",
    "finding_store_rows",
]
