"""Event records read in Python at msgspec's speed, with exactly pydantic's verdict.

:func:`read_record` turns one raw event record into the model's record -- what
``to_model(parse_event(raw))`` gives (:mod:`monitor.contract.events`) -- or raises that
function's :class:`~monitor.contract.events.EventError`, with its reason. Two paths:

* **fast**: one ``msgspec`` decode into structs typed from the contract's rules
  (:data:`streaming.schema.RULES`, the rules the Spark schema is derived from): every
  field's type, bounds, lengths and pattern checked in C, lists straight to tuples;
* **exact**: anything the fast path refuses, or might read otherwise than pydantic, goes
  to pydantic itself (``parse_event``), which accepts or gives the reason.

So the fast path may only ever accept a record pydantic accepts, with the same values.
Where msgspec and pydantic (jiter) differ, the record never reaches the fast path's
verdict (each guard is tested against pydantic, ``tests/streaming/test_records.py``):

* nesting: jiter refuses a value inside more than ``JSON_MAX_DEPTH`` containers, msgspec
  skips an unknown field of any depth -- a record with more ``[`` and ``{`` than that
  bound goes the exact way;
* bytes: msgspec does not check the UTF-8 of a member it skips -- bytes are decoded to text
  first (strictly), and a record that is not UTF-8 goes the exact way;
* patterns: pydantic's (Rust) ``$`` matches only at the end, Python's also before a final
  newline -- patterns end in ``\\Z`` here.

Where they agree, tested all the same: escapes (a key spelled ``"ki\\u006ed"``, lone
surrogates: both refuse them alike), a ``kind`` written twice (msgspec refuses a second tag
that differs; pydantic then decides), duplicate members (the last wins in both).

Measured side by side (``bench.validation_bench --python-side``, 200k collector-shaped
round records): the model's records in their order from the records themselves 9.6 µs of
CPU a record, from the bodies the JVM packs today 12.8; and on the JVM, routing only 7.8
µs a record against the operator input's 25.9. Nothing here uses Spark: the operator is
its user-to-be (``docs/streaming.md``, "Validation where the records are decoded").
"""

from __future__ import annotations

import functools
import operator
from dataclasses import fields
from typing import Annotated, Any, Literal

import msgspec

from monitor.contract.events import EventError, parse_event, round_of, to_model
from monitor.model import BrokerReport, TopicConfigReport, TopicDeleted
from monitor.model.events import ModelRecord, PartitionMeta, ReplicaReport
from streaming.schema import JSON_MAX_DEPTH, RULES, FieldRule, Scalar

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
    if s.pattern is not None:
        meta["pattern"] = python_pattern(s.pattern)
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


def _exact(raw: str | bytes) -> ModelRecord:
    return to_model(parse_event(raw))


def _needs_exact(text: str) -> bool:
    """Might msgspec read this record otherwise than pydantic? (Its nesting, see above.)"""
    return text.count("[") + text.count("{") > JSON_MAX_DEPTH


def read_record(raw: str | bytes) -> ModelRecord:
    """The model's record of one raw event record (``to_model(parse_event(raw))``); raises
    :class:`EventError` (pydantic's reason) for a record the contract refuses."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode()  # msgspec does not check the bytes of a field it skips
        except UnicodeDecodeError:
            return _exact(raw)
    if _needs_exact(raw):
        return _exact(raw)
    try:
        d = _DECODER.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return _exact(raw)
    values = msgspec.structs.astuple(d)
    cls = type(d)
    ev = MODEL_CLASSES[_KIND_OF[cls]](*values[: _N_FIELDS[cls]])
    if cls is not _PARTITION or not d.replica_samples:
        return ev  # type: ignore[no-any-return]
    return round_of(ev, d.replica_samples)


__all__ = ["MODEL_CLASSES", "MODEL_FIELDS", "EventError", "python_pattern", "read_record"]
