"""Event records read in Python at msgspec's speed, with exactly pydantic's verdict.

:func:`read_record` turns one raw event record into the model's record -- what
``to_model(parse_event(raw))`` gives (:mod:`monitor.contract.events`) -- or raises that
function's :class:`~monitor.contract.events.EventError`, with its reason. Two paths:

* **fast**: one ``msgspec`` decode into structs typed from the contract's rules
  (:data:`streaming.schema.RULES`, the rules the Spark schema is derived from): every
  field's type, bounds, lengths and pattern checked in C, lists straight to tuples;
* **exact**: anything the fast path refuses, or might read otherwise than pydantic, goes
  to pydantic itself (``parse_event``), which accepts or gives the reason -- a partition
  record breaking one of Kafka's invariants too (:mod:`monitor.contract.invariants`: the
  same function is the contract's validator).

So the fast path may only ever accept a record pydantic accepts, with the same values.
Where msgspec and pydantic (jiter) differ, the record never reaches the fast path's
verdict (each case is tested against pydantic, ``tests/streaming/test_records.py``):

* unknown members: msgspec would skip one of any depth, jiter refuses a value nested
  deeper than ``JSON_MAX_DEPTH`` -- the structs forbid unknown members, so a record with
  any goes the exact way (the known members are at most three deep);
* bytes: decoded to text first (strictly): a record that is not UTF-8 goes the exact way;
* patterns: pydantic's (Rust) ``$`` matches only at the end, Python's also before a final
  newline -- patterns end in ``\\Z`` here (and are checked after the decode, once per
  distinct value: :data:`_PATTERNS`).

Where they agree, tested all the same: escapes (a key spelled ``"ki\\u006ed"``, lone
surrogates: both refuse them alike), a ``kind`` written twice (msgspec refuses a second tag
that differs; pydantic then decides), duplicate members (the last wins in both).

Measured side by side (``bench.validation_bench --python-side``, 200k collector-shaped
round records): the operator's reading and ordering of a bucket's records 6.9 µs of CPU a
record, against 5.5 for the values the JVM used to validate and pack; on the JVM, the
operator input (routing only) 8.0 µs a record against 21.4 for that validation alone.
Nothing here uses Spark; the operator reads every routed record with it
(``docs/streaming.md``, "Validation where the records are decoded").
"""

from __future__ import annotations

import functools
import operator
import re
from dataclasses import fields
from typing import Annotated, Any, Literal

import msgspec

from monitor.contract.events import EventError, parse_event, to_model
from monitor.contract.invariants import partition_problem
from monitor.model import BrokerReport, TopicConfigReport, TopicDeleted
from monitor.model.events import ModelRecord, PartitionMeta, ReplicaReport, round_of
from streaming.schema import RULES, FieldRule, Scalar

#: The model's record of each kind (a ``partition`` record with samples: a PartitionRound).
MODEL_CLASSES: dict[str, type] = {
    "topic_config": TopicConfigReport,
    "topic_deleted": TopicDeleted,
    "broker": BrokerReport,
    "partition": PartitionMeta,
    "replica": ReplicaReport,
}
#: Per kind, the contract fields the model record is made of, in its constructor's order.
MODEL_FIELDS: dict[str, tuple[str, ...]] = {
    kind: tuple(f.name for f in fields(cls)) for kind, cls in MODEL_CLASSES.items()
}


def python_pattern(pattern: str) -> str:
    """A pydantic (Rust regex) pattern as Python's ``re`` reads it the same: a final ``$``
    as ``\\Z`` (Python's ``$`` also matches before a trailing newline). Any other ``$``
    is refused (not needed by the contract, and not translated)."""
    body = pattern[:-1] if pattern.endswith("$") and not pattern.endswith("\\$") else None
    if body is None or "$" in body:
        raise TypeError(f"records: unsupported pattern {pattern!r}")
    return body + "\\Z"


def _scalar_type(s: Scalar) -> Any:
    """The msgspec type of one scalar, its constraints as ``Meta``."""
    if s.kind == "literal":
        return Literal[s.literals]
    if s.kind == "model":
        return _struct("sample", s.fields)
    meta: dict[str, Any] = {
        k: v
        for k, v in (
            ("ge", s.ge),
            ("le", s.le),
            ("min_length", s.min_length),
            ("max_length", s.max_length),
        )
        if v is not None
    }
    base = {"int": int, "str": str, "bool": bool}[s.kind]
    return Annotated[base, msgspec.Meta(**meta)] if meta else base


def _field_type(rule: FieldRule) -> Any:
    t = _scalar_type(rule.scalar)
    if rule.is_list:
        t = tuple[t, ...]  # type: ignore[valid-type]
        if rule.list_max_length is not None:
            t = Annotated[t, msgspec.Meta(max_length=rule.list_max_length)]
    return t | None if rule.nullable else t


def _member(rule: FieldRule) -> tuple[Any, ...]:
    t = _field_type(rule)
    if rule.required:
        return (rule.name, t)
    default = tuple(rule.default) if isinstance(rule.default, list) else rule.default
    return (rule.name, t, default)


def _struct(name: str, rules: tuple[FieldRule, ...], kind: str | None = None) -> Any:
    """A struct of ``rules`` (unknown members ignored, as the contract's ``extra="ignore"``)."""
    return msgspec.defstruct(
        name,
        [_member(r) for r in rules],
        kw_only=True,
        gc=False,
        tag_field="kind" if kind else None,
        tag=kind,
        forbid_unknown_fields=True,
    )


def _kind_struct(kind: str) -> Any:
    """The struct of one kind: the model record's fields first, in constructor order."""
    by_name = {r.name: r for r in RULES[kind]}
    order = [*MODEL_FIELDS[kind], *(n for n in by_name if n not in MODEL_FIELDS[kind])]
    return _struct(f"{kind}_record", tuple(by_name[n] for n in order), kind)


_STRUCTS: dict[str, Any] = {kind: _kind_struct(kind) for kind in MODEL_CLASSES}
_KIND_OF: dict[Any, str] = {s: k for k, s in _STRUCTS.items()}
_DECODER = msgspec.json.Decoder(functools.reduce(operator.or_, _STRUCTS.values()))
_N_FIELDS: dict[Any, int] = {s: len(MODEL_FIELDS[k]) for k, s in _STRUCTS.items()}
_PARTITION = _STRUCTS["partition"]


def _patterned(rules: list[FieldRule]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The fields of a kind whose values must match a pattern (scalar strings only)."""
    out = []
    for r in rules:
        if r.scalar.kind == "model":
            assert all(f.scalar.pattern is None for f in r.scalar.fields)
        elif r.scalar.pattern is not None:
            assert not r.is_list, f"records: a list of patterned strings ({r.name})"
            out.append((r.name, re.compile(python_pattern(r.scalar.pattern))))
    return tuple(out)


#: Struct -> (field, pattern) checked after the decode: a topic name or id matches its
#: pattern on every round of every partition of its topic, so a value is checked once and
#: then found in :data:`_MATCHED` (a regular expression per value in msgspec cost ~1.3 µs a
#: round record, the set ~0.1).
_PATTERNS: dict[Any, tuple[tuple[str, re.Pattern[str]], ...]] = {
    s: _patterned(RULES[k]) for k, s in _STRUCTS.items()
}
#: Values seen to match their field's pattern (cleared when it grows past
#: :data:`MATCHED_MAX`, so that a stream of new names cannot grow it without bound).
_MATCHED: set[tuple[str, str]] = set()
MATCHED_MAX = 1_000_000


def _exact(raw: str | bytes) -> ModelRecord:
    return to_model(parse_event(raw))


def read_record(raw: str | bytes) -> ModelRecord:
    """The model's record of one raw event record (``to_model(parse_event(raw))``); raises
    :class:`EventError` (pydantic's reason) for a record the contract refuses."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode()
        except UnicodeDecodeError:
            return _exact(raw)
    try:
        d = _DECODER.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return _exact(raw)
    cls = type(d)
    for name, pattern in _PATTERNS[cls]:
        value = getattr(d, name)
        if value is None or (name, value) in _MATCHED:
            continue
        if pattern.search(value) is None:
            return _exact(raw)
        if len(_MATCHED) >= MATCHED_MAX:
            _MATCHED.clear()
        _MATCHED.add((name, value))
    if (
        cls is _PARTITION
        and partition_problem(d.leader, d.replicas, d.isr, d.eligible_leader_replicas) is not None
    ):
        return _exact(raw)  # pydantic's reason (the same function's)
    values = msgspec.structs.astuple(d)
    ev = MODEL_CLASSES[_KIND_OF[cls]](*values[: _N_FIELDS[cls]])
    if cls is not _PARTITION or not d.replica_samples:
        return ev  # type: ignore[no-any-return]
    return round_of(ev, d.replica_samples)


__all__ = ["MODEL_CLASSES", "MODEL_FIELDS", "EventError", "python_pattern", "read_record"]
