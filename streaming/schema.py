"""The event contract as Spark sees it, derived from :mod:`monitor.contract.events`.

Nothing here repeats a field name, a type, a range or a pattern of the contract: everything is
read from the pydantic models at import time (``model_fields``: annotations, ``Ge``/``Le``,
``MinLen``/``MaxLen``, ``pattern``, defaults, the ``kind`` discriminator; a list of nested
models, such as ``replica_samples``, from the nested model's own fields) and turned into

* :data:`EVENT_STRUCT` — the typed row every accepted event becomes (the union of the fields
  of every kind; a field absent from a kind is null, a defaulted field gets its default);
* :func:`validate` — a pure Spark SQL projection that parses the raw Kafka value with
  ``try_parse_json`` (Spark's VARIANT type keeps JSON's own types, so ``"5"`` stays a string
  and ``true`` a boolean, which a typed ``from_json`` would silently coerce or null out) and
  computes a ``reason`` in the wording of :class:`monitor.contract.events.EventError` (``field:
  message``, several joined by ``; ``) — or null when the event is valid;
* its hot path: a typed ``from_json`` (:data:`TYPED_STRUCT`) that accepts a record only when
  cheap checks (:func:`typed_ok_sql`) prove the typed reading cannot differ from pydantic's
  verdict; every other record takes the VARIANT path above.

The JVM does all of it; Python never sees an invalid record except to forward it.

Where Spark's JSON reader and pydantic's (jiter) differ, this module makes Spark agree with
pydantic, because pydantic is the contract:

* jiter accepts ``NaN``/``Infinity``/``-Infinity`` (as floats), Jackson does not: such tokens
  outside strings are rewritten to ``{}`` before parsing (an object is invalid in every known
  field and ignored in unknown ones, which is exactly pydantic's verdict for a float);
* jiter keeps the last of duplicate keys: ``spark.sql.variant.allowDuplicateKeys`` must be true
  (:data:`REQUIRED_SPARK_CONF`, set by the job's session builder);
* jiter refuses documents nested more than :data:`JSON_MAX_DEPTH` levels (with a value inside);
  Jackson allows 1000: a cheap bracket count picks the (rare) candidates, which then get an
  exact depth computation;
* Python's regex ``$`` and Java's differ on a trailing newline: the pattern's final ``$`` is
  translated to ``\\z``.
"""

from __future__ import annotations

import json
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union

import annotated_types
from pydantic import BaseModel, TypeAdapter, ValidationError
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

#: Spark settings the derived validation relies on (see the module docstring); checked by
#: :func:`validate`.
REQUIRED_SPARK_CONF: dict[str, str] = {
    "spark.sql.variant.allowDuplicateKeys": "true",
    # true would make the typed reader read "" as null for int/boolean/array fields, with no
    # corrupt-record flag: "high_watermark": "" would pass the typed path as an absent field.
    "spark.sql.legacy.json.allowEmptyString.enabled": "false",
    # The derived SQL writes backslash escapes in its string literals ('\\u', '\\['): true
    # would pass them through as two characters -- the surrogate check would look for
    # something else, silently, and count_sql's '[' pattern would not compile.
    "spark.sql.parser.escapedStringLiterals": "false",
}

#: jiter's recursion limit: a value nested inside more than this many containers is rejected.
JSON_MAX_DEPTH = 200

#: How many field errors a reason lists before "... and N more" (as ``monitor.contract.events``).
MAX_REASONS = 5

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

    @property
    def is_model_list(self) -> bool:
        """A list of nested models (``replica_samples``)."""
        return self.is_list and self.scalar.kind == "model"


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
    scalars (no literal) without a default other than None -- what the typed row, the
    diagnosis and the typed path's proof (:func:`_typed_model_list_ok_sql`) know."""
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


# --- pydantic's own verdict on literal values (its strict mode still equates 1, 1.0, true) --


def _literal_accepts(s: Scalar) -> dict[str, bool]:
    """Which JSON spellings pydantic accepts for a literal: asked, not assumed."""
    literal: Any = Literal[s.literals]
    adapter: TypeAdapter[Any] = TypeAdapter(literal, config={"strict": True})

    def ok(text: str) -> bool:
        try:
            adapter.validate_json(text)
            return True
        except ValidationError:
            return False

    ints = [x for x in s.literals if isinstance(x, int) and not isinstance(x, bool)]
    probe = ints[0] if ints else None
    return {
        "true": ok("true"),
        "false": ok("false"),
        "float": probe is not None and ok(f"{probe}.0"),
        "exp": probe is not None and ok(f"{probe}e0"),
    }


# --- SQL generation ----------------------------------------------------------------------------


def _sql_str(text: str) -> str:
    """A Spark SQL string literal (raw, so backslashes reach Java's regex untouched)."""
    if "'" in text:
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return "r'" + text + "'"


def java_pattern(pattern: str) -> str:
    """Python/Rust regex -> Java: a final ``$`` means end of text (not before a newline)."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        return pattern[:-1] + "\\z"
    return pattern


def _len_msg(kind: str, bound: int, what: str) -> str:
    unit = "character" if bound == 1 else "characters"
    return f"String should have {kind} {bound} {unit}" if what == "str" else ""


def _scalar_error(s: Scalar, x: str, t: str) -> str:
    """SQL: the error message for scalar variant ``x`` whose schema_of_variant is ``t``."""
    if s.kind == "int":
        parts = [f"WHEN {t} <> 'BIGINT' THEN 'Input should be a valid integer'"]
        v = f"variant_get({x}, '$', 'bigint')"
        if s.ge is not None:
            parts.append(
                f"WHEN {v} < {s.ge} THEN 'Input should be greater than or equal to {s.ge}'"
            )
        if s.le is not None and s.le < 2**63 - 1:
            parts.append(f"WHEN {v} > {s.le} THEN 'Input should be less than or equal to {s.le}'")
        return "CASE " + " ".join(parts) + " END"
    if s.kind == "bool":
        return f"CASE WHEN {t} <> 'BOOLEAN' THEN 'Input should be a valid boolean' END"
    if s.kind == "str":
        v = f"variant_get({x}, '$', 'string')"
        parts = [f"WHEN {t} <> 'STRING' THEN 'Input should be a valid string'"]
        if s.min_length is not None:
            parts.append(
                f"WHEN char_length({v}) < {s.min_length} THEN "
                f"'{_len_msg('at least', s.min_length, 'str')}'"
            )
        if s.max_length is not None:
            parts.append(
                f"WHEN char_length({v}) > {s.max_length} THEN "
                f"'{_len_msg('at most', s.max_length, 'str')}'"
            )
        if s.pattern is not None:
            msg = f"String should match pattern '{s.pattern}'"
            parts.append(
                f"WHEN NOT ({v} RLIKE {_sql_str(java_pattern(s.pattern))}) THEN {_sql_str(msg)}"
            )
        return "CASE " + " ".join(parts) + " END"
    # literal
    acc = _literal_accepts(s)
    strs = [x for x in s.literals if isinstance(x, str)]
    ints = [x for x in s.literals if isinstance(x, int) and not isinstance(x, bool)]
    ok: list[str] = []
    if strs:
        in_list = ", ".join(_sql_str(v) for v in strs)
        ok.append(f"({t} = 'STRING' AND variant_get({x}, '$', 'string') IN ({in_list}))")
    if ints:
        in_list = ", ".join(str(v) for v in ints)
        # try_variant_get: a number past the cast's range (``-2**70`` is DECIMAL(22,0), past
        # DECIMAL(38,18)) is NULL -- not accepted -- instead of an error that kills the query
        # (found by the generated-records test).
        ok.append(f"({t} = 'BIGINT' AND try_variant_get({x}, '$', 'bigint') IN ({in_list}))")
        if acc["float"]:
            ok.append(
                f"({t} LIKE 'DECIMAL%' AND "
                f"try_variant_get({x}, '$', 'decimal(38,18)') IN ({in_list}))"
            )
        if acc["exp"]:
            ok.append(f"({t} = 'DOUBLE' AND try_variant_get({x}, '$', 'double') IN ({in_list}))")
        if acc["true"] and 1 in ints:
            ok.append(f"({t} = 'BOOLEAN' AND variant_get({x}, '$', 'boolean'))")
        if acc["false"] and 0 in ints:
            ok.append(f"({t} = 'BOOLEAN' AND NOT variant_get({x}, '$', 'boolean'))")
    # coalesce: a NULL from try_variant_get must refuse, not make the whole test NULL
    # (NOT NULL is NULL: no error, the record accepted).
    either = " OR ".join(f"coalesce({o}, false)" for o in ok) or "false"
    return f"CASE WHEN NOT ({either}) THEN '__literal__' END"


def _repr_sql(x: str, t: str) -> str:
    """SQL rendering of a JSON value the way :func:`monitor.contract.events.shown` shows it in
    reasons: Python's ``repr``, a string cut to ``SHOWN_CHARS`` characters, a list or an
    object named, not printed (a reason never copies more than a few dozen characters)."""
    n = contract.SHOWN_CHARS
    v = f"variant_get({x}, '$', 'string')"
    return (
        f"CASE WHEN {t} = 'STRING' THEN CASE WHEN char_length({v}) > {n} THEN "
        f"concat('''', substr({v}, 1, {n}), '''... (', char_length({v}), ' characters)') "
        f"ELSE concat('''', {v}, '''') END "
        f"WHEN {t} = 'BOOLEAN' THEN CASE WHEN variant_get({x}, '$', 'boolean') THEN 'True' "
        f"ELSE 'False' END WHEN {t} = 'VOID' THEN 'None' "
        f"WHEN {t} LIKE 'ARRAY<%' THEN 'a list' WHEN {t} LIKE 'OBJECT<%' THEN 'an object' "
        f"ELSE substr(to_json({x}), 1, {n}) END"
    )


def _list_ok_sql(s: Scalar, x: str, t: str) -> str:
    """SQL: a list whose items are all valid, decided without lambda functions."""
    if s.kind != "int":
        raise TypeError("schema derivation: only lists of integers are supported")
    arr = f"variant_get({x}, '$', 'array<bigint>')"
    conds = [
        f"({t} = 'ARRAY<VOID>' AND size({arr}) = 0)",
    ]
    full = [f"{t} = 'ARRAY<BIGINT>'", f"element_at(sort_array({arr}), 1) IS NOT NULL"]
    if s.ge is not None:
        full.append(f"array_min({arr}) >= {s.ge}")
    if s.le is not None:
        full.append(f"array_max({arr}) <= {s.le}")
    conds.append("(" + " AND ".join(full) + ")")
    return "(" + " OR ".join(conds) + ")"


def _item_error_sql(s: Scalar, y: str) -> str:
    """SQL: what is wrong with item ``y`` (a VARIANT) of a list of models, as the tail of
    pydantic's location and message (``': Input should be an object'``, ``'.broker: field
    required'``, ``'.log_end_offset: Input should be ...'``), or NULL when it is valid.

    The first wrong field in model order (pydantic lists them all; the reason names the
    list either way). Duplicate keys: the VARIANT keeps the last, as jiter. Unknown keys are
    ignored (``extra="ignore"``, checked by :func:`_model_scalar`).
    """
    errs = []
    for f in s.fields:
        x = f"variant_get({y}, '$.{f.name}')"  # a plain identifier: no quoting needed
        t = f"schema_of_variant({x})"
        cases = [
            f"WHEN {x} IS NULL THEN " + (f"'.{f.name}: field required'" if f.required else "NULL")
        ]
        if f.nullable:
            cases.append(f"WHEN {t} = 'VOID' THEN NULL")
        # a JSON null where not nullable: the scalar's type message (as pydantic's)
        cases.append(f"ELSE concat('.{f.name}: ', {_scalar_error(f.scalar, x, t)})")
        errs.append("CASE " + " ".join(cases) + " END")
    return (
        f"CASE WHEN {y} IS NULL OR NOT schema_of_variant({y}) LIKE 'OBJECT<%' "
        f"THEN ': Input should be an object' ELSE coalesce({', '.join(errs)}) END"
    )


def _value_error_sql(r: FieldRule, x: str, t: str) -> str:
    """SQL: ``name: message`` when the present value ``x`` (type ``t``) breaks the rule, else NULL.

    Whether the field is *required* is decided per kind by :func:`_kind_reason_sql`; the type
    and constraints of a field name are the same in every kind (checked at import).
    """
    null_type = {"int": "integer", "str": "string", "bool": "boolean"}
    name = r.name
    cases = []
    if r.nullable:
        cases.append(f"WHEN {t} = 'VOID' THEN NULL")
    if r.is_list:
        arr = f"variant_get({x}, '$', 'array<variant>')"
        cases.append(f"WHEN {t} NOT LIKE 'ARRAY<%' THEN '{name}: Input should be a valid array'")
        if r.list_max_length is not None:
            cases.append(
                f"WHEN size({arr}) > {r.list_max_length} THEN concat('{name}: List should have at "
                f"most {r.list_max_length} items after validation, not ', size({arr}))"
            )
        if r.is_model_list:
            # The first bad item (``replica_samples.1: ...``, ``replica_samples.0.broker:
            # ...``); the slow path only (lambda functions), for records both fast
            # acceptances refused -- every non-empty list of models (see _fast_ok_sql).
            errs = f"transform({arr}, y -> {_item_error_sql(r.scalar, 'y')})"
            first_bad = f"array_position(transform({errs}, e -> e IS NOT NULL), true)"
            cases.append(
                f"WHEN {first_bad} > 0 THEN concat('{name}.', {first_bad} - 1, "
                f"element_at({errs}, cast({first_bad} AS INT)))"
            )
            return "CASE " + " ".join(cases) + " END"
        # Fast acceptance (no lambda functions: those are interpreted, not code-generated).
        ok = _list_ok_sql(r.scalar, x, t)
        item_err = _scalar_error(r.scalar, "y", "schema_of_variant(y)")
        errs = f"transform({arr}, y -> {item_err})"
        first_bad = f"array_position(transform({errs}, e -> e IS NOT NULL), true)"
        cases.append(f"WHEN {ok} THEN NULL")
        cases.append(
            f"WHEN {first_bad} > 0 THEN concat('{name}.', {first_bad} - 1, ': ', "
            f"element_at({errs}, cast({first_bad} AS INT)))"
        )
        return "CASE " + " ".join(cases) + " END"
    err = _scalar_error(r.scalar, x, t)
    if r.scalar.kind == "literal":
        lit = ", ".join(repr(v) for v in r.scalar.literals)
        if name == "schema_version":
            bad = (
                f"concat('{name}: unsupported schema_version ', {_repr_sql(x, t)}, "
                f"' (this reader knows {lit})')"
            )
        else:
            bad = f"'{name}: Input should be {lit}'"
        cases.append(f"WHEN ({err}) IS NOT NULL THEN {bad}")
    else:
        if not r.nullable:
            cases.append(
                f"WHEN {t} = 'VOID' THEN '{name}: Input should be a valid "
                f"{null_type[r.scalar.kind]}'"
            )
        cases.append(f"ELSE concat('{name}: ', {err})")  # concat(..., NULL) is NULL
    return "CASE " + " ".join(cases) + " END"


# The VARIANT path's per-record intermediates live in two struct columns, null for a record
# the typed path accepted (one null per row instead of ~80 null columns carried through the
# projections): ``_vt`` (``t_<field>``: schema_of_variant, ``v_<field>``: the typed value)
# and ``_e`` (``e_<field>``: each field's error; null when the record is valid).
_VT, _E = "_vt", "_e"


def _t(name: str) -> str:
    return f"`{_VT}`.`t_{name}`"


def _v(name: str) -> str:
    return f"`{_VT}`.`v_{name}`"


def _err(name: str) -> str:
    return f"`{_E}`.`e_{name}`"


def _kind_reason_sql(kind: str) -> str:
    """SQL: the field errors of an event of ``kind`` joined by ``; `` (NULL when valid).

    References the ``_e.e_<field>`` values (each field's error, computed once per record by
    :func:`validate`), in the kind's own field order, as pydantic reports them. ``concat_ws``
    skips nulls; only when more than MAX_REASONS fields are wrong does the array path run
    to cut the list like pydantic's reason.
    """
    parts = []
    for r in RULES[kind]:
        missing = f"'{r.name}: field required'" if r.required else "NULL"
        parts.append(f"CASE WHEN `s`.`{r.name}` IS NULL THEN {missing} ELSE {_err(r.name)} END")
    joined = f"nullif(concat_ws('; ', {', '.join(parts)}), '')"
    if len(parts) <= MAX_REASONS:
        return joined
    errs = f"filter(array({', '.join(parts)}), e -> e IS NOT NULL)"
    cut = (
        f"concat(array_join(slice({errs}, 1, {MAX_REASONS}), '; '), "
        f"'; ... and ', size({errs}) - {MAX_REASONS}, ' more')"
    )
    count = " + ".join(f"CASE WHEN ({p}) IS NULL THEN 0 ELSE 1 END" for p in parts)
    return f"CASE WHEN ({count}) > {MAX_REASONS} THEN {cut} ELSE {joined} END"


# JSON tokens jiter accepts and Jackson refuses, when outside a string: replaced by {}.
#
# In linear time (a lookahead proving "outside a string" from each token to the end of the
# record was quadratic: 160 kB of NaN tokens took 22.8 s per evaluation). One left-to-right
# pass matches either a whole string literal or a token; the replacement "$1<M>$2" keeps a
# string as it is (followed by the marker M) and puts M before a token -- so afterwards every
# token outside a string, and only those, follows M; a second pass rewrites those to {} and a
# third drops the markers. M is U+0001, which no valid JSON holds raw (JSON strings escape
# control characters): a record holding one is left as it is (Jackson refuses it, as jiter).
_MARK = "\\u0001"  # as a Spark SQL literal escape
_STRING_OR_NONFINITE = r'("(?:[^"\\]|\\.)*+")|(?<=[\[:,\s])(-?Infinity|NaN)(?=[\s,\]}])'
_STRING_LITERAL = r'"(?:[^"\\]|\\.)*+"'
_SURROGATE_ESCAPE = r"\\u[dD][89a-fA-F]"


def _text_sql(raw: str) -> str:
    """SQL: the record as text, non-finite tokens outside strings rewritten to ``{}`` (only
    when present at all)."""
    s = f"cast({raw} AS STRING)"
    marked = f"regexp_replace({s}, {_sql_str(_STRING_OR_NONFINITE)}, '$1{_MARK}$2')"
    tokens = f"regexp_replace({marked}, '{_MARK}(-?Infinity|NaN)', '{{}}')"
    return (
        f"CASE WHEN (instr({s}, 'NaN') > 0 OR instr({s}, 'Infinity') > 0) "
        f"AND instr({s}, '{_MARK}') = 0 "
        f"THEN replace({tokens}, '{_MARK}', '') ELSE {s} END"
    )


def _strip_strings_sql(text: str) -> str:
    """SQL: the text with every string literal replaced by ``0`` and whitespace removed."""
    return f"regexp_replace(regexp_replace({text}, {_sql_str(_STRING_LITERAL)}, '0'), '\\\\s', '')"


def _too_deep_sql(text: str) -> str:
    """SQL: true when jiter's recursion limit would reject the document.

    Only records with more than JSON_MAX_DEPTH brackets can be too deep; for those the exact
    depth is computed: strings dropped, empty containers (a value at their parent's depth)
    replaced by a scalar, then the running depth of the brackets left.
    """
    brackets = f"(length({text}) - length(translate({text}, '[{{', '')))"
    only = (
        f"regexp_replace(regexp_replace({_strip_strings_sql(text)}, "
        f"'\\\\[\\\\]|\\\\{{\\\\}}', '0'), '[^\\\\[\\\\]{{}}]', '')"
    )
    depth = (
        f"aggregate(split({only}, ''), named_struct('d', 0, 'm', 0), "
        f"(acc, c) -> named_struct('d', acc.d + CASE WHEN c IN ('[', '{{') THEN 1 "
        f"WHEN c IN (']', '}}') THEN -1 ELSE 0 END, 'm', greatest(acc.m, acc.d + "
        f"CASE WHEN c IN ('[', '{{') THEN 1 ELSE 0 END))).m"
    )
    return f"({brackets} > {JSON_MAX_DEPTH} AND {depth} > {JSON_MAX_DEPTH})"


def _trailing_sql(text: str) -> str:
    """SQL: true when something follows the top-level value (Jackson stops reading there).

    Candidates, for which the structure is scanned exactly: records not ending in ``}``, and
    records with a ``}`` followed by anything but whitespace. Complete: a trailing value
    after the top-level object either does not end in ``}``, or follows the object's ``}``
    (after whitespace). Not only what cannot follow a closing brace in JSON (``}x``): a
    trailing ``}`` (``{..}}``), ``,{}`` or ``][{}`` follow it the way a nested object's
    closing brace is followed in valid JSON (found by the round-record hostile cases). So
    every record with a nested object is a candidate -- on this slow path only, for
    records both fast acceptances refused.
    """
    candidate = (
        # rtrim, not a regular expression: '\\s+$' backtracks from every space of a long
        # run (100k spaces then x: 12.7 s); the set is Java's \\s.
        f"(NOT trim(TRAILING ' \\t\\n\\r\\u000C\\u000B' FROM {text}) LIKE '%}}' "
        f"OR {text} RLIKE '\\\\}}\\\\s*\\\\S')"
    )
    scan = (
        f"aggregate(split({_strip_strings_sql(text)}, ''), named_struct('d', 0, 'x', false, "
        f"'c', false), (acc, ch) -> named_struct('d', acc.d + CASE WHEN ch IN ('[', '{{') "
        f"THEN 1 WHEN ch IN (']', '}}') THEN -1 ELSE 0 END, 'x', acc.x OR acc.c, 'c', acc.c OR "
        f"(acc.d = 1 AND ch IN (']', '}}')))).x"
    )
    return f"({candidate} AND {scan})"


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


#: The raw shape read by ``from_json``: every known field as a VARIANT (JSON's own types kept).
RAW_STRUCT = "struct<" + ", ".join(f"`{n}`: variant" for n in ALL_FIELDS) + ", `_corrupt`: string>"

# Spark's JSON reader is lenient by default (single quotes ...): strict JSON, as jiter.
_FROM_JSON_OPTIONS = (
    "map('mode', 'PERMISSIVE', 'columnNameOfCorruptRecord', '_corrupt', "
    "'allowNonNumericNumbers', 'false', 'allowSingleQuotes', 'false', "
    "'allowUnquotedFieldNames', 'false', 'allowComments', 'false', "
    "'allowNumericLeadingZeros', 'false', 'allowBackslashEscapingAnyCharacter', 'false', "
    "'allowUnquotedControlChars', 'false')"
)


def precheck_sql(raw: str = "value") -> str:
    """SQL: why the record is not even a candidate event (encoding, JSON, kind), or NULL.

    Needs column ``s`` (the ``from_json`` struct of :data:`RAW_STRUCT`).
    """
    text = f"cast({raw} AS STRING)"
    kind_x = "`s`.`kind`"
    kind_t = f"schema_of_variant({kind_x})"
    kind_s = f"variant_get({kind_x}, '$', 'string')"
    known = ", ".join(_sql_str(k) for k in KINDS)
    return (
        "CASE "
        f"WHEN {raw} IS NULL THEN 'empty record' "
        f"WHEN NOT is_valid_utf8({text}) THEN 'not UTF-8: invalid byte sequence' "
        f"WHEN {text} RLIKE '^\\\\s*$' THEN 'empty record' "
        "WHEN `s` IS NULL OR `s`.`_corrupt` IS NOT NULL THEN "
        f"CASE WHEN try_parse_json({_text_sql(raw)}) IS NOT NULL "
        "THEN 'event: Input should be an object' ELSE 'invalid JSON' END "
        f"WHEN NOT ltrim({text}) LIKE '{{%' THEN 'event: Input should be an object' "
        # Jackson skips an unknown field holding a lone surrogate escape; jiter refuses it.
        f"WHEN instr({text}, '\\\\u') > 0 AND {text} RLIKE {_sql_str(_SURROGATE_ESCAPE)} "
        f"AND try_parse_json({_text_sql(raw)}) IS NULL THEN 'invalid JSON: lone surrogate' "
        f"WHEN {_too_deep_sql(text)} THEN 'invalid JSON: recursion limit exceeded' "
        f"WHEN {_trailing_sql(text)} THEN 'invalid JSON: trailing characters' "
        f"WHEN {kind_x} IS NULL THEN 'kind: field required' "
        f"WHEN NOT ({kind_t} = 'STRING' AND {kind_s} IN ({known})) "
        f"THEN concat('kind: unknown kind ', {_repr_sql(kind_x, kind_t)}) END"
    )


def field_errors_sql() -> str:
    """SQL: the field errors of a candidate event, by its kind (NULL when valid)."""
    kind_s = "variant_get(`s`.`kind`, '$', 'string')"
    per_kind = " ".join(f"WHEN {kind_s} = {_sql_str(k)} THEN {_kind_reason_sql(k)}" for k in KINDS)
    return f"CASE {per_kind} END"


def _typed_sql(r: FieldRule) -> str:
    """SQL: the field as its Spark type (lenient cast: only trusted once the row is valid)."""
    return f"try_variant_get(`s`.`{r.name}`, '$', '{r.spark_type.simpleString()}')"


def _bounds_sql(s: Scalar, low: str, high: str) -> list[str]:
    """SQL: the contract's ``ge``/``le`` on an integer (``low`` = ``high``) or a list's
    smallest and largest item. An ``le`` of 2^63-1 says nothing about a bigint: left out."""
    conds = []
    if s.ge is not None:
        conds.append(f"{low} >= {s.ge}")
    if s.le is not None and s.le < 2**63 - 1:
        conds.append(f"{high} <= {s.le}")
    return conds


def _string_sql(s: Scalar, v: str) -> list[str]:
    """SQL: the contract's length bounds and pattern on the string ``v``."""
    conds = []
    if s.min_length is not None:
        conds.append(f"char_length({v}) >= {s.min_length}")
    if s.max_length is not None:
        conds.append(f"char_length({v}) <= {s.max_length}")
    if s.pattern is not None:
        conds.append(f"{v} RLIKE {_sql_str(java_pattern(s.pattern))}")
    return conds


def _fast_ok_sql(r: FieldRule) -> str:
    """SQL: the present value of the field is valid (``_vt``'s ``t_``/``v_`` values), cheaply.

    This is the hot path: exact type name (``schema_of_variant``) plus the constraints on the
    typed value, no lambda functions and no string building. Anything it refuses is explained
    by the slow path (:func:`_value_error_sql`), which runs only for refused rows.
    """
    t, v = _t(r.name), _v(r.name)
    s = r.scalar
    alts: list[str] = []
    if r.nullable:
        alts.append(f"{t} = 'VOID'")
    if r.is_model_list:
        # The empty list only: a non-empty list of models (``}`` inside, so refused by
        # _fast_precheck_sql anyway) gets the full diagnosis, which accepts a valid one.
        alts.append(f"({t} = 'ARRAY<VOID>' AND size({v}) = 0)")
    elif r.is_list:
        conds = [f"{t} = 'ARRAY<BIGINT>'", f"element_at(sort_array({v}), 1) IS NOT NULL"]
        if r.list_max_length is not None:
            conds.append(f"size({v}) <= {r.list_max_length}")
        conds += _bounds_sql(s, f"array_min({v})", f"array_max({v})")
        alts.append("(" + " AND ".join(conds) + ")")
        alts.append(f"{t} = 'ARRAY<VOID>' AND size({v}) = 0")
    elif s.kind == "int":
        alts.append("(" + " AND ".join([f"{t} = 'BIGINT'", *_bounds_sql(s, v, v)]) + ")")
    elif s.kind == "bool":
        alts.append(f"{t} = 'BOOLEAN'")
    elif s.kind == "str":
        alts.append("(" + " AND ".join([f"{t} = 'STRING'", *_string_sql(s, v)]) + ")")
    else:  # literal: the common spelling only; the slow path knows pydantic's other ones
        ints = [x for x in s.literals if isinstance(x, int) and not isinstance(x, bool)]
        strs = [x for x in s.literals if isinstance(x, str)]
        if ints:
            alts.append(f"({t} = 'BIGINT' AND {v} IN ({', '.join(map(str, ints))}))")
        if strs:
            alts.append(f"({t} = 'STRING' AND {v} IN ({', '.join(map(_sql_str, strs))}))")
    return "(" + " OR ".join(alts or ["false"]) + ")"


def _fast_kind_ok_sql(kind: str) -> str:
    conds = []
    for r in RULES[kind]:
        present = f"`s`.`{r.name}` IS NOT NULL"
        ok = _fast_ok_sql(r)
        conds.append(f"({present} AND {ok})" if r.required else f"(NOT {present} OR {ok})")
    return " AND ".join(conds)


def _fast_precheck_sql(raw: str) -> str:
    """SQL: the record certainly passes :func:`precheck_sql`'s checks (cheap tests only)."""
    text = f"cast({raw} AS STRING)"
    known = ", ".join(_sql_str(k) for k in KINDS)
    return (
        f"({raw} IS NOT NULL AND is_valid_utf8({text}) AND `s` IS NOT NULL "
        f"AND `s`.`_corrupt` IS NULL AND startswith({text}, '{{') AND endswith({text}, '}}') "
        # exactly one '}' (no object but the event's own: a list of models is accepted here
        # only when empty -- see _fast_ok_sql): no trailing value possible
        f"AND length({text}) - length(replace({text}, '}}', '')) = 1 "
        # fewer than JSON_MAX_DEPTH+1 opening brackets fit: never too deep
        f"AND length({text}) <= {2 * JSON_MAX_DEPTH + 1} "
        f"AND instr({text}, '\\\\u') = 0 "
        f"AND {_t('kind')} = 'STRING' AND {_v('kind')} IN ({known}))"
    )


def fast_ok_sql(raw: str = "value") -> str:
    per_kind = " ".join(
        f"WHEN {_v('kind')} = {_sql_str(k)} THEN {_fast_kind_ok_sql(k)}" for k in KINDS
    )
    return f"({_fast_precheck_sql(raw)} AND CASE {per_kind} ELSE false END)"


# --- the typed hot path ---------------------------------------------------------------------
#
# A typed ``from_json`` (every known field as its Spark type) is cheaper than VARIANT plus a
# ``schema_of_variant`` per field, but Spark's typed reader is not pydantic: it turns any token
# into a string field (``5`` -> "5", ``true`` -> "true", ``{..}`` -> its JSON text, ``1e999``
# -> '"Infinity"'), reads JSON null and an absent key alike, keeps null items of arrays,
# replaces invalid UTF-8 with U+FFFD, skips lone surrogates, trailing values and 1000-deep
# nesting. It is strict where it matters otherwise: an integer field takes only an integer
# token in range, a boolean field only true/false; anything else sets the corrupt-record
# column (with either value of ``spark.sql.json.enablePartialResults``). So a record is
# accepted on the typed path only when cheap checks prove the typed reading cannot differ from
# pydantic's verdict; every other record takes the VARIANT path, unchanged.

#: First characters of every text the typed reader makes of a non-string token for a string
#: field: a number (``-``, digits), an object, an array, a non-finite double (quoted). (An
#: object also needs a ``}`` of its own, which :func:`_braces_sql` refuses anyway.)
_COERCED_FIRST = tuple('-0123456789"{[')
#: ... and the whole text it makes of a boolean.
_COERCED_WHOLE = ("true", "false")


def _maybe_coerced(value: str) -> bool:
    """Whether a string value could be what the typed reader made of a non-string token."""
    return value in _COERCED_WHOLE or value[:1] in _COERCED_FIRST


def _genuine_string_sql(v: str) -> str:
    """SQL: string ``v`` cannot come from a non-string token (some genuine strings fail too)."""
    first = ", ".join(_sql_str(c) for c in _COERCED_FIRST)
    whole = ", ".join(_sql_str(c) for c in _COERCED_WHOLE)
    return f"(NOT left({v}, 1) IN ({first}) AND NOT {v} IN ({whole}))"


_TYPED_CORRUPT = "_corrupt"
if _TYPED_CORRUPT in ALL_FIELDS:  # pragma: no cover - a contract change
    raise TypeError(f"schema derivation: a field is named {_TYPED_CORRUPT}")
if not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) for n in ALL_FIELDS):
    # The typed path proves a key absent by looking for ``"name"`` in the raw text: only
    # sound when the name has no other JSON spelling but ``\u`` escapes (excluded there).
    raise TypeError("schema derivation: field names must be plain identifiers")

#: The typed shape of the hot path: every known field as its Spark type, plus the corrupt flag.
TYPED_STRUCT = StructType(
    [StructField("kind", StringType(), True)]
    + [StructField(n, _rule_for(n).spark_type, True) for n in ALL_FIELDS if n != "kind"]
    + [StructField(_TYPED_CORRUPT, StringType(), True)]
)


def typed_struct(raw: str = "value") -> Column:
    """``from_json`` of the raw record into :data:`TYPED_STRUCT` (no non-finite rewrite: a
    ``NaN`` token makes the record corrupt, and so sends it to the VARIANT path)."""
    ddl = TYPED_STRUCT.simpleString()
    return F.expr(f"from_json(cast({raw} AS STRING), '{ddl}', {_FROM_JSON_OPTIONS})")


def _typed_model_list_ok_sql(r: FieldRule, v: str) -> str:
    """SQL: the non-null typed list of models ``v`` is what pydantic accepts -- given the
    record-level brace count of :func:`typed_ok_sql` (one ``}`` per item).

    What the typed reader does with an item (Spark 4, either ``enablePartialResults``): an
    object becomes a struct (unknown keys skipped, names case-sensitive, the last of
    duplicate keys kept, as jiter; a known field takes only its own token type in range,
    else the record is corrupt); a JSON null becomes a null item; any other token (number,
    string, boolean, array) makes the record corrupt. So, once not corrupt, an item is
    either an object or null, and a field of it null either way (absent or JSON null).

    * Every item non-null, every required field non-null: the extracted array of a required
      field (``v.broker``: null for a null item too) has no null -- ``sort_array`` puts nulls
      first. Without a required field, the structs themselves are sorted (null first).
      This is also what makes the brace count sound: each item counted by ``size`` is an
      object, and so holds its own ``}``.
    * Ranges: ``array_min``/``array_max`` of the extracted arrays (they skip nulls: a
      nullable field's all-null array gives NULL, which is no error: coalesce).
    * Absent and null read alike, so only fields where pydantic accepts both or neither are
      provable: required and not nullable, or nullable with default None. Integer and
      boolean fields only (a string field would read any token as text). A model with
      another field gets no typed proof: a non-empty list takes the VARIANT path.

    Field extraction from an array of structs and the array functions are code-generated;
    lambda functions (``forall``, ``transform``) are interpreted, and cost per record.
    """
    fields = r.scalar.fields
    conds = []
    if r.list_max_length is not None:
        conds.append(f"size({v}) <= {r.list_max_length}")
    provable = all(f.scalar.kind in ("int", "bool") and f.required != f.nullable for f in fields)
    if not provable:
        return "(" + " AND ".join([*conds, f"size({v}) = 0"]) + ")"
    required = [f for f in fields if f.required]
    items = [f"try_element_at(sort_array({v}.`{f.name}`), 1) IS NOT NULL" for f in required] or [
        f"try_element_at(sort_array({v}), 1) IS NOT NULL"
    ]
    for f in fields:
        if f.scalar.kind != "int":
            continue
        col = f"{v}.`{f.name}`"
        bounds = _bounds_sql(f.scalar, f"array_min({col})", f"array_max({col})")
        items += [f"coalesce({b}, true)" if f.nullable else b for b in bounds]
    conds.append(f"(size({v}) = 0 OR ({' AND '.join(items)}))")
    return "(" + " AND ".join(conds) + ")"


def _typed_value_ok_sql(r: FieldRule, v: str) -> str:
    """SQL: the non-null typed value ``v`` of the field is what pydantic accepts."""
    s = r.scalar
    if r.is_model_list:
        return _typed_model_list_ok_sql(r, v)
    if r.is_list:
        if s.kind != "int":
            raise TypeError("schema derivation: only lists of integers are supported")
        conds = []
        if r.list_max_length is not None:
            conds.append(f"size({v}) <= {r.list_max_length}")
        # null items are kept by the typed reader (pydantic refuses them): sort_array puts
        # them first; try_element_at because the list may be empty.
        items = [f"try_element_at(sort_array({v}), 1) IS NOT NULL"]
        items += _bounds_sql(s, f"array_min({v})", f"array_max({v})")
        conds.append(f"(size({v}) = 0 OR ({' AND '.join(items)}))")
        return "(" + " AND ".join(conds) + ")"
    if s.kind == "int":
        return "(" + " AND ".join(["true", *_bounds_sql(s, v, v)]) + ")"
    if s.kind == "bool":
        return "true"  # only true/false tokens reach a boolean field uncorrupted
    if s.kind == "str":
        return "(" + " AND ".join([_genuine_string_sql(v), *_string_sql(s, v)]) + ")"
    # literal: the common spelling only (an int literal's field is read as a bigint: only an
    # integer token gets there; pydantic's other spellings take the VARIANT path).
    ints = [x for x in s.literals if isinstance(x, int) and not isinstance(x, bool)]
    strs = [x for x in s.literals if isinstance(x, str)]
    if ints and strs:
        raise TypeError("schema derivation: literals mixing strings and integers unsupported")
    if strs:
        ok = f"{v} IN ({', '.join(map(_sql_str, strs))})"
        if any(_maybe_coerced(x) for x in strs):
            ok = f"({ok} AND {_genuine_string_sql(v)})"
        return ok
    return f"{v} IN ({', '.join(map(str, ints))})"


def _typed_field_ok_sql(r: FieldRule, text: str) -> str:
    """SQL: the field of the typed struct ``p`` is valid as pydantic sees it, or unproven."""
    v = f"`p`.`{r.name}`"
    if r.required:
        absent_ok = "false"  # absent or null: an error either way, the VARIANT path words it
    elif r.nullable:
        absent_ok = "true"  # absent or null: both valid
    else:  # absent is valid, null is not: the key must be absent from the text, in any
        # spelling (no \u escape anywhere: "offline\u005freplicas" is the same key)
        absent_ok = (
            f"(NOT contains({text}, {_sql_str(json.dumps(r.name))}) "
            f"AND NOT contains({text}, '\\\\u'))"
        )
    return f"CASE WHEN {v} IS NULL THEN {absent_ok} ELSE {_typed_value_ok_sql(r, v)} END"


def _kind_literal_ok() -> None:
    if any(_maybe_coerced(k) for k in KINDS):  # pragma: no cover - a contract change
        raise TypeError("schema derivation: a kind could be a coerced non-string token")


_kind_literal_ok()


def _braces_sql(kind: str, text: str) -> str:
    """SQL: ``text`` holds exactly as many ``}`` as the typed reading of a ``kind`` event has
    objects: the event itself, plus one per item of each list of models (a byte count: in
    valid UTF-8 the byte of ``}`` is never part of another character).

    Why this proves one object with nothing after it, and no other object anywhere: the
    record is not corrupt, so Jackson read one complete object from the start of the text,
    and every item it kept in a list of models is an object within it (non-null items:
    :func:`_typed_model_list_ok_sql`, ANDed in the same kind's branch) with its own
    closing brace. So the parsed object alone holds at least 1 + (items) braces; the text
    holding no more means no ``}`` outside it -- since the text ends with ``}``, nothing
    follows it (no trailing value) -- and none inside but those: no nested object in an
    unknown key or an item's unknown key, none in an earlier duplicate of a list, no ``}``
    in a string. For a kind without a list of models: exactly one ``}``.
    """
    items = "".join(
        f" + coalesce(array_size(`p`.`{r.name}`), 0)" for r in RULES[kind] if r.is_model_list
    )
    return f"{count_sql(text, '}')} = 1{items}"


def count_sql(text: str, char: str) -> str:
    """SQL: how many times ``char`` (ASCII) occurs in ``text`` (valid UTF-8: its byte is never
    part of another character).

    By ``split``: Spark hands a one-character pattern that is no regex metacharacter (or a
    backslash-escaped one) to Java's ``String.split``, which finds it with ``indexOf``
    without compiling a pattern. ``replace`` (``octet_length`` before minus after) compares
    the pattern at every byte, a call each: the typed path's counts on a round record took
    2.90 us of JVM CPU that way, 0.80 us by ``split`` (``bench.validation_bench --counts``).

    >>> print(count_sql("t", "}"), count_sql("t", "["))
    (size(split(t, '}', -1)) - 1) (size(split(t, '\\\\[', -1)) - 1)
    """
    if len(char) != 1 or not char.isascii() or char in "\\'":
        raise ValueError(f"count_sql: one ASCII character but a backslash or quote, not {char!r}")
    pattern = "\\\\" + char if char in ".$|()[{^?*+" else char
    return f"(size(split({text}, '{pattern}', -1)) - 1)"


def typed_ok_sql(raw: str = "value") -> str:
    """SQL: the typed reading ``p`` of the record is certainly what pydantic accepts.

    Record-level proofs first (the cheap ones of :func:`_fast_precheck_sql`): UTF-8 (the
    typed reader would replace bad bytes), one object with nothing after it (as many ``}``
    as the typed reading has objects, the last character: see :func:`_braces_sql`), no
    surrogate ``\\u`` escape (no lone surrogate), too few brackets to be nested
    beyond jiter's limit, no corrupt field; then, per kind, the brace count and every field.
    Byte-level tests (``contains``, ``octet_length``, ``endswith``) where they suffice:
    ``instr`` and ``length`` walk the characters, and cost up to 2 us/record more.
    """
    text = f"cast({raw} AS STRING)"
    # An upper bound of the nesting depth, paid by every record over 401 bytes -- every round
    # record: the '[' and the '}' (not '{': an accepted record's '}' are exactly its
    # objects' (the brace count, ANDed below), so at least as many as the objects' '{'
    # outside strings). Counted in bytes (count_sql): length(translate(..)) walks the
    # characters and cost 12 us/record more.
    brackets = f"({count_sql(text, '[')} + {count_sql(text, '}')})"
    per_kind = " ".join(
        f"WHEN {_sql_str(k)} THEN "
        + " AND ".join([_braces_sql(k, text), *(_typed_field_ok_sql(r, text) for r in RULES[k])])
        for k in KINDS
    )
    return (
        f"coalesce(`p` IS NOT NULL AND `p`.`{_TYPED_CORRUPT}` IS NULL AND is_valid_utf8({text}) "
        # startswith: belt and braces (a top-level non-object is a corrupt record anyway)
        f"AND startswith({text}, '{{') AND endswith({text}, '}}') "
        # a surrogate escape (a lone one is skipped by Jackson in an unknown field, refused by
        # jiter); other \u escapes (json.dumps writes every non-ASCII character so) are fine
        f"AND (NOT contains({text}, '\\\\u') OR NOT {text} RLIKE {_sql_str(_SURROGATE_ESCAPE)}) "
        f"AND (octet_length({text}) <= {2 * JSON_MAX_DEPTH + 1} OR {brackets} <= {JSON_MAX_DEPTH}) "
        f"AND CASE `p`.`kind` {per_kind} ELSE false END, false)"
    )


def check_spark_conf(spark: Any) -> None:
    """Refuse to validate on a session without :data:`REQUIRED_SPARK_CONF`."""
    wrong = {
        k: spark.conf.get(k, None)
        for k, v in REQUIRED_SPARK_CONF.items()
        if str(spark.conf.get(k, None)).lower() != v
    }
    if wrong:
        raise RuntimeError(
            f"streaming.schema needs {REQUIRED_SPARK_CONF} (see streaming.session); got {wrong}"
        )


def typed_columns() -> list[Column]:
    """The :data:`EVENT_STRUCT` columns of a validated record (defaults filled in)."""
    typed = F.col("_typed")
    cols = [F.when(typed, F.col("p.kind")).otherwise(F.expr(_v("kind"))).alias("kind")]
    for name, r in UNION_FIELDS.items():
        col = F.when(typed, F.col(f"p.{name}")).otherwise(F.expr(_v(name)))
        if r.default is not None:
            if r.is_list and r.default == []:
                col = F.coalesce(col, F.expr(f"cast(array() AS {r.spark_type.simpleString()})"))
            else:
                col = F.coalesce(col, F.lit(r.default))
        cols.append(col.cast(r.spark_type).alias(name))
    return cols


def parsed_struct(raw: str = "value") -> Column:
    """``from_json`` into :data:`RAW_STRUCT` (one Jackson pass, unknown keys skipped)."""
    return F.expr(f"from_json({_text_sql(raw)}, '{RAW_STRUCT}', {_FROM_JSON_OPTIONS})")


def interpreted_sql(sql: str) -> str:
    """SQL: ``sql``, evaluated by Spark's interpreter instead of generated code.

    A projection without whole-stage code generation (the job's: see ``streaming.session``)
    generates its Java source again in every task -- before the compiled-class cache is
    even asked -- and the generation walks every expression, evaluated or not. The
    diagnosis of :func:`validate` is most of the job's SQL (~60k characters) and runs only
    for the rare record neither fast path accepts: generating it cost ~70 ms of CPU per
    task, every micro-batch (a Flight Recording of ``bench.spark_bench``: a quarter of the
    tasks' CPU at 100k partitions). ``zip_with`` is one of Spark's interpreted expressions
    (``CodegenFallback``): the code generator neither walks its arguments nor hoists their
    subexpressions, and evaluates them only when the row gets there. The price is paid by
    the records it diagnoses (``bench.validation_bench --diagnosis``: 1.36x).
    """
    return f"element_at(zip_with(array({sql}), array(1), (a, b) -> a), 1)"


def validate(df: Any, raw: str = "value", compiled_diagnosis: bool = False) -> Any:
    """Add ``reason`` (null when valid) and the typed event columns to a DataFrame of records.

    Rows keep every input column. Valid rows have every :data:`EVENT_STRUCT` column filled;
    invalid rows have ``reason`` set and undefined event columns.

    Three tiers: the typed path (:func:`typed_ok_sql`) accepts the (overwhelmingly common)
    valid record from a typed ``from_json``; the VARIANT parse runs only for the records it
    does not accept, where a cheap conjunction accepts the valid ones; only a record both
    refuse gets the full, pydantic-worded diagnosis — which may still find it valid
    (pydantic's rarer spellings, such as ``"schema_version": 1.0``). The diagnosis is
    interpreted (:func:`interpreted_sql`), unless ``compiled_diagnosis`` (the benchmark's
    comparison: the same verdicts and reasons either way).
    """
    wrap = (lambda sql: sql) if compiled_diagnosis else interpreted_sql
    check_spark_conf(df.sparkSession)
    fields = [n for n in ALL_FIELDS if n != "kind"]
    typed_p = df.select("*", typed_struct(raw).alias("p"))
    flagged = typed_p.select("*", F.expr(typed_ok_sql(raw)).alias("_typed"))
    # The VARIANT path: only for records the typed path did not accept.
    fallback = ~F.col("_typed")
    parsed = flagged.select("*", F.when(fallback, parsed_struct(raw)).alias("s"))
    vt = F.struct(
        F.expr("schema_of_variant(`s`.`kind`)").alias("t_kind"),
        F.expr("try_variant_get(`s`.`kind`, '$', 'string')").alias("v_kind"),
        *[F.expr(f"schema_of_variant(`s`.`{n}`)").alias(f"t_{n}") for n in fields],
        *[F.expr(_typed_sql(UNION_FIELDS[n])).alias(f"v_{n}") for n in UNION_FIELDS],
        F.expr("try_variant_get(`s`.`schema_version`, '$', 'bigint')").alias("v_schema_version"),
    )
    typed = parsed.select("*", F.when(fallback, vt).alias(_VT))
    # ok: the typed path's verdict, else the VARIANT fast conjunction. A CASE, not an OR: the
    # code generator's common-subexpression elimination hoists repeated subexpressions out of
    # an OR's right side (evaluated for every record), not out of a CASE branch.
    ok = f"CASE WHEN _typed THEN true ELSE {fast_ok_sql(raw)} END"
    # Each field's error once per record, only for records neither path accepted.
    errors = (
        "named_struct("
        + ", ".join(
            f"'e_{n}', {_value_error_sql(_rule_for(n), f'`s`.`{n}`', _t(n))}" for n in fields
        )
        + ")"
    )
    errs = typed.select("*", F.expr(f"CASE WHEN {ok} THEN NULL ELSE {wrap(errors)} END").alias(_E))
    reason = F.expr(
        f"CASE WHEN `{_E}` IS NULL THEN NULL "
        f"ELSE {wrap(f'coalesce({precheck_sql(raw)}, {field_errors_sql()})')} END"
    )
    return errs.select(*[F.col(c) for c in df.columns], reason.alias("reason"), *typed_columns())


def python_reason(raw: bytes | str) -> str | None:
    """pydantic's verdict, for tests and tooling: None when valid, else the reason."""
    try:
        contract.parse_event(raw)
    except contract.EventError as e:
        return str(e)
    return None


_FIELD_RE = re.compile(r"(?:^|; )([A-Za-z_][\w]*)(?:\.\w+)*:")


def reason_fields(reason: str) -> list[str]:
    """The (top-level) field names a reason mentions, in order (``'a: x; b.1: y; c.0.d: z'``
    -> ``['a', 'b', 'c']``)."""
    return _FIELD_RE.findall(reason)
