"""The event contract as Spark sees it, derived from :mod:`monitor.contract.events`.

Nothing here repeats a field name, a type, a range or a pattern of the contract: everything is
read from the pydantic models at import time (``model_fields``: annotations, ``Ge``/``Le``,
``MinLen``/``MaxLen``, ``pattern``, defaults, the ``kind`` discriminator; a list of nested
models, such as ``replica_samples``, from the nested model's own fields) and turned into

* :data:`RULES` -- each kind's fields as :class:`FieldRule` (type, bounds, lengths, pattern,
  default): what :mod:`streaming.records` builds its msgspec structs from, the reader that
  validates every record the job routes (pydantic's verdict, at msgspec's speed);
* :data:`EVENT_STRUCT` -- the typed row of an accepted event (the union of the fields of every
  kind; a field absent from a kind is null);
* :data:`TYPED_STRUCT` and :func:`typed_struct` -- a typed, strict ``from_json`` of a raw record:
  what the stack's own ceiling reads (``bench.spark_bench --mode ceiling``).

Until 2026-11-30 this module also derived the job's validation as Spark SQL (a VARIANT parse,
a typed hot path and a diagnosis worded as pydantic's); the job now routes in the JVM and
validates where it decodes, in the Python worker (``docs/streaming.md``), and that SQL was
removed (last in commit 37cb6fe).
"""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from monitor.contract import events as contract

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

ScalarKind = Literal["int", "str", "bool", "literal", "model"]


@dataclass(frozen=True)
class Scalar:
    """Type and constraints of one scalar (a field, or the items of a list field) -- or, kind
    ``model``, of a nested model (the items of a list field): its ``fields``, in model order."""

    kind: ScalarKind
    ge: int | None = None
    le: int | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    literals: tuple[Any, ...] = ()
    fields: tuple[FieldRule, ...] = ()


@dataclass(frozen=True)
class FieldRule:
    """One field of one event kind, as pydantic declares it."""

    name: str
    scalar: Scalar
    is_list: bool
    list_max_length: int | None
    required: bool  # no default: absent -> "field required"
    nullable: bool  # JSON null accepted
    default: Any  # value when absent (None when nullable/optional)

    @property
    def spark_type(self) -> DataType:
        base = _spark_scalar_type(self.scalar)
        return ArrayType(base, containsNull=True) if self.is_list else base


def _spark_scalar_type(s: Scalar) -> DataType:
    if s.kind == "model":
        return StructType([StructField(f.name, f.spark_type, True) for f in s.fields])
    if s.kind == "str":
        return StringType()
    if s.kind == "bool":
        return BooleanType()
    if s.kind == "literal":
        first = s.literals[0]
        return StringType() if isinstance(first, str) else LongType()
    lo = s.ge if s.ge is not None else -(2**63)
    hi = s.le if s.le is not None else 2**63 - 1
    return IntegerType() if lo >= INT32_MIN and hi <= INT32_MAX else LongType()


def _constraints(metadata: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, annotated_types.Ge):
            out["ge"] = int(m.ge)  # type: ignore[call-overload]
        elif isinstance(m, annotated_types.Le):
            out["le"] = int(m.le)  # type: ignore[call-overload]
        elif isinstance(m, annotated_types.MinLen):
            out["min_length"] = m.min_length
        elif isinstance(m, annotated_types.MaxLen):
            out["max_length"] = m.max_length
        elif isinstance(m, FieldInfo):
            out.update(_constraints(m.metadata))
        elif getattr(m, "pattern", None) is not None:
            out["pattern"] = m.pattern
        elif type(m).__name__ not in ("Strict",):
            raise TypeError(f"schema derivation: unsupported constraint {m!r}")
    return out


def _scalar(annotation: Any, metadata: list[Any]) -> Scalar:
    """A scalar type (possibly ``Annotated``) with its constraints."""
    meta = list(metadata)
    while typing.get_origin(annotation) is typing.Annotated:
        args = typing.get_args(annotation)
        annotation, meta = args[0], [*meta, *args[1:]]
    if typing.get_origin(annotation) is Literal:
        return Scalar("literal", literals=typing.get_args(annotation))
    kinds: dict[Any, ScalarKind] = {int: "int", str: "str", bool: "bool"}
    if annotation not in kinds:
        raise TypeError(f"schema derivation: unsupported type {annotation!r}")
    return Scalar(kinds[annotation], **_constraints(meta))


def _model_scalar(model: type[BaseModel]) -> Scalar:
    """The items of a list of nested models: the model's own fields, in model order.

    Supported: strict models that ignore unknown keys (as the events), whose fields are
    scalars (no literal) without a default other than None -- what the Spark struct and the
    msgspec structs of :mod:`streaming.records` are built for."""
    config = model.model_config
    if not config.get("strict") or config.get("extra", "ignore") != "ignore":
        raise TypeError(f"schema derivation: {model.__name__} must be strict, extra='ignore'")
    fields = tuple(_field_rule(n, f) for n, f in model.model_fields.items())
    for f in fields:
        if f.is_list or f.scalar.kind in ("literal", "model"):
            raise TypeError(f"schema derivation: {model.__name__}.{f.name}: scalars only")
        if f.default is not None:
            raise TypeError(f"schema derivation: {model.__name__}.{f.name}: defaults but None")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", f.name):
            raise TypeError(f"schema derivation: {model.__name__}.{f.name}: not an identifier")
    return Scalar("model", fields=fields)


def _field_rule(name: str, info: FieldInfo) -> FieldRule:
    annotation: Any = info.annotation
    nullable = False
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"schema derivation: {name}: unions other than X | None unsupported")
        nullable, annotation = True, args[0]
    required = info.is_required()
    if info.default_factory is not None:
        default: Any = info.default_factory()  # type: ignore[call-arg]
    else:
        default = None if required else info.default
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        list_meta = _constraints(info.metadata)
        is_model = isinstance(item, type) and issubclass(item, BaseModel)
        return FieldRule(
            name,
            _model_scalar(item) if is_model else _scalar(item, []),
            True,
            list_meta.get("max_length"),
            required,
            nullable,
            default,
        )
    return FieldRule(
        name, _scalar(annotation, info.metadata), False, None, required, nullable, default
    )


def _event_models() -> dict[str, type[BaseModel]]:
    """``kind`` value -> pydantic model, read from the discriminated union of the contract."""
    union = typing.get_args(contract.Event)[0]
    out: dict[str, type[BaseModel]] = {}
    for model in typing.get_args(union):
        (kind,) = typing.get_args(model.model_fields["kind"].annotation)
        out[kind] = model
    return out


MODELS: dict[str, type[BaseModel]] = _event_models()
KINDS: tuple[str, ...] = tuple(MODELS)
RULES: dict[str, list[FieldRule]] = {
    kind: [_field_rule(n, f) for n, f in model.model_fields.items() if n != "kind"]
    for kind, model in MODELS.items()
}


def _union_fields() -> dict[str, FieldRule]:
    merged: dict[str, FieldRule] = {}
    for rules in RULES.values():
        for r in rules:
            if r.scalar.kind == "literal":
                continue  # schema_version: always the one supported value once accepted
            seen = merged.get(r.name)
            if seen is not None and seen.spark_type != r.spark_type:
                raise TypeError(f"schema derivation: {r.name} has different types across kinds")
            merged.setdefault(r.name, r)
    return merged


UNION_FIELDS: dict[str, FieldRule] = _union_fields()

#: The typed row of an accepted event: ``kind``, then every field of every kind.
EVENT_STRUCT = StructType(
    [StructField("kind", StringType(), False)]
    + [StructField(n, r.spark_type, True) for n, r in UNION_FIELDS.items()]
)


#: Every field name of every kind, ``kind`` first, in first-seen order.
ALL_FIELDS: tuple[str, ...] = (
    "kind",
    *dict.fromkeys(r.name for rs in RULES.values() for r in rs),
)


def _rule_for(name: str) -> FieldRule:
    """The one rule of a field name; the same in every kind that has it (else: an error)."""
    found = {
        (r.scalar, r.is_list, r.list_max_length, r.nullable)
        for rs in RULES.values()
        for r in rs
        if r.name == name
    }
    if len(found) != 1:
        raise TypeError(f"schema derivation: {name} has different rules across kinds")
    return next(r for rs in RULES.values() for r in rs if r.name == name)


# Spark's JSON reader is lenient by default (single quotes ...): strict JSON, as jiter.
_FROM_JSON_OPTIONS = (
    "map('mode', 'PERMISSIVE', 'columnNameOfCorruptRecord', '_corrupt', "
    "'allowNonNumericNumbers', 'false', 'allowSingleQuotes', 'false', "
    "'allowUnquotedFieldNames', 'false', 'allowComments', 'false', "
    "'allowNumericLeadingZeros', 'false', 'allowBackslashEscapingAnyCharacter', 'false', "
    "'allowUnquotedControlChars', 'false')"
)

_TYPED_CORRUPT = "_corrupt"
if _TYPED_CORRUPT in ALL_FIELDS:  # pragma: no cover - a contract change
    raise TypeError(f"schema derivation: a field is named {_TYPED_CORRUPT}")

#: The typed shape of a record: every known field as its Spark type, plus the corrupt flag.
TYPED_STRUCT = StructType(
    [StructField("kind", StringType(), True)]
    + [StructField(n, _rule_for(n).spark_type, True) for n in ALL_FIELDS if n != "kind"]
    + [StructField(_TYPED_CORRUPT, StringType(), True)]
)


def typed_struct(raw: str = "value") -> Column:
    """``from_json`` of the raw record into :data:`TYPED_STRUCT` (a record Jackson cannot
    read strictly -- ``NaN``, single quotes -- is flagged in ``_corrupt``)."""
    ddl = TYPED_STRUCT.simpleString()
    return F.expr(f"from_json(cast({raw} AS STRING), '{ddl}', {_FROM_JSON_OPTIONS})")
