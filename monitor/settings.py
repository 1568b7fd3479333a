"""What the collector's and the job's settings share: one file format, one precedence, and
refusing what names no setting.

Precedence, highest first (docs/configuration.md): explicit arguments (the CLI's flags) >
environment variables ``<PREFIX><KEY>`` > the settings file (TOML, YAML or JSON) > defaults.
Both settings classes derive from :class:`LayeredSettings`, which puts :class:`FileSource`
below the environment; :func:`load` reads and checks the file and the environment, then
builds the settings with the file in force.

pydantic-settings reads ``<PREFIX><FIELD>`` from the environment and silently ignores any
other variable with the prefix -- so a misspelt ``MONITOR_COLLECTOR_INTERVL_S`` would leave
the default in force with nobody told. :func:`load` refuses those (:func:`unknown_env_keys`)
and unknown keys in the file (:func:`unknown_keys`), naming the variable or the file and key.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

#: The settings files read, by suffix.
FORMATS = {".toml": "TOML", ".yaml": "YAML", ".yml": "YAML", ".json": "JSON"}

S = TypeVar("S", bound=BaseSettings)


class SettingsError(ValueError):
    """Settings that cannot be used; the message is one line naming the file or variable."""


# -- the file ---------------------------------------------------------------------------------


def read_file(path: Path, label: str | None = None) -> dict[str, Any]:
    """A settings file's mapping (``.toml``, ``.yaml``/``.yml``, ``.json``).

    Every problem is a :class:`SettingsError` of one line starting with ``label`` (default:
    the path): an unknown suffix, an unreadable file, bad syntax, a top level that is not a
    mapping. An empty file is no settings.
    """
    where = label or str(path)
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise SettingsError(
            f"{where}: a {path.suffix or 'suffix-less'} file is not read; "
            "give TOML (.toml), YAML (.yaml, .yml) or JSON (.json)"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SettingsError(f"{where}: cannot read it: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise SettingsError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        data = _parse(kind, text)
    except ValueError as e:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise SettingsError(f"{where}: not valid {kind}: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsError(
            f"{where}: the top level must be a mapping of settings (key: value), "
            f"not a {type(data).__name__}"
        )
    return data


def _parse(kind: str, text: str) -> Any:
    """The file's content (None: empty); a syntax error is a one-line ValueError."""
    if kind == "TOML":
        return tomllib.loads(text)
    if kind == "JSON":
        return json.loads(text) if text.strip() else None
    # PyYAML only when a YAML file is read: the job's executors import this module too, and
    # their Python need not have it.
    import yaml  # type: ignore[import-untyped]

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(_yaml_problem(e)) from None


def _yaml_problem(e: Any) -> str:
    """PyYAML's error in one line: the problem and where (its own text spans lines)."""
    problem = getattr(e, "problem", None)
    mark = getattr(e, "problem_mark", None)
    if problem and mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(e).split())


# -- which keys exist ---------------------------------------------------------------------------


def fields_of(model: type) -> dict[str, Any]:
    """A settings model's fields and their types: a pydantic model's or a dataclass's."""
    if isinstance(model, type) and issubclass(model, BaseModel):
        return {name: f.annotation for name, f in model.model_fields.items()}
    if dataclasses.is_dataclass(model):
        hints = typing.get_type_hints(model)
        return {f.name: hints[f.name] for f in dataclasses.fields(model)}
    return {}


def nested_model(annotation: Any) -> type | None:
    """The settings model a field holds (``KafkaConnection | None`` -> KafkaConnection), if any."""
    candidates = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    for c in candidates:
        if isinstance(c, type) and (issubclass(c, BaseModel) or dataclasses.is_dataclass(c)):
            return c
    return None


def is_mapping(annotation: Any) -> bool:
    """A field that takes any key (``dict[int, str]``, optional or not)."""
    candidates = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    return any(typing.get_origin(c) in (dict, Mapping) or c is dict for c in candidates)


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def unknown_keys(model: type, data: Mapping[Any, Any], prefix: str = "") -> list[str]:
    """The keys of ``data`` (dotted: ``kafka.sasl_user``) that name no field of ``model``,
    looking into nested settings models; a mapping field (``jmx_urls``) takes any key.

    >>> from pydantic import create_model
    >>> Db = create_model("Db", host=(str, "h"))
    >>> App = create_model("App", db=(Db, Db()), tags=(dict[str, str], {}))
    >>> unknown_keys(App, {"db": {"hots": "x"}, "tags": {"any": "y"}, "prot": 1})
    ['db.hots', 'prot']
    """
    fields = fields_of(model)
    bad: list[str] = []
    for key, value in data.items():
        if key not in fields:
            bad.append(f"{prefix}{key}")
            continue
        sub = nested_model(fields[key])
        if sub is not None and isinstance(value, Mapping):
            bad += unknown_keys(sub, value, f"{prefix}{key}.")
    return sorted(bad)


def nested_keys(model: type) -> dict[str, list[str] | None]:
    """For :func:`unknown_env_keys`: each field set in parts (``<FIELD>__<KEY>``) and its keys
    (None: a mapping, any key)."""
    nested: dict[str, list[str] | None] = {}
    for name, annotation in fields_of(model).items():
        sub = nested_model(annotation)
        if sub is not None:
            nested[name] = list(fields_of(sub))
        elif is_mapping(annotation):
            nested[name] = None
    return nested


def unknown_env_keys(
    prefix: str,
    fields: Iterable[str],
    nested: Mapping[str, Iterable[str] | None],
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """The ``prefix``-ed variables that name no setting.

    ``fields``: the settings' names; ``nested``: for a setting read in parts
    (``<PREFIX><FIELD>__<KEY>``), the keys it has -- None for a mapping that takes any key.

    >>> env = {"APP_PORT": "1", "APP_PROT": "2", "APP_DB__HOST": "h", "APP_DB__HOTS": "h",
    ...        "APP_TAGS__ANY": "x", "OTHER": "y"}
    >>> unknown_env_keys("APP_", ["port", "db", "tags"], {"DB": ["host"], "TAGS": None}, env)
    ['APP_DB__HOTS', 'APP_PROT']
    """
    env = os.environ if environ is None else environ
    names = {f.upper() for f in fields}
    parts = {k.upper(): None if v is None else {x.upper() for x in v} for k, v in nested.items()}
    bad = []
    for key in env:
        if not key.upper().startswith(prefix):
            continue
        head, _, tail = key.upper()[len(prefix) :].partition("__")
        known = parts.get(head)
        if head not in names or (tail and not (head in parts and (known is None or tail in known))):
            bad.append(key)
    return sorted(bad)


# -- the sources, in order ----------------------------------------------------------------------

_FILE: ContextVar[Mapping[str, Any]] = ContextVar(
    "monitor_settings_file", default=types.MappingProxyType({})
)


class FileSource(PydanticBaseSettingsSource):
    """The settings file's values (given to :func:`load`); nothing outside it."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return _FILE.get().get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_FILE.get())


class LayeredSettings(BaseSettings):
    """The base of the collector's and the job's settings: arguments > environment > the
    settings file (:class:`FileSource`, given to :func:`load`) > defaults."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            dotenv_settings,
            FileSource(settings_cls),
            file_secret_settings,
        )


@contextmanager
def _file_in_force(data: Mapping[str, Any]) -> Iterator[None]:
    token = _FILE.set(data)
    try:
        yield
    finally:
        _FILE.reset(token)


def env_prefix(cls: type[BaseSettings]) -> str:
    return str(cls.model_config.get("env_prefix", ""))


def config_file_var(cls: type[BaseSettings]) -> str:
    """The variable that names the settings file when no ``--config`` does."""
    return f"{env_prefix(cls)}CONFIG"


def unknown_settings_env(
    cls: type[BaseSettings],
    allowed_env: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """The ``<PREFIX>*`` variables that name no setting of ``cls`` (nor ``<PREFIX>CONFIG``,
    the settings file, nor one of ``allowed_env``)."""
    names = [*cls.model_fields, "CONFIG", *allowed_env]
    return unknown_env_keys(env_prefix(cls), names, nested_keys(cls), environ)


def load(
    cls: type[S],
    what: str,
    path: Path | None = None,
    args: Mapping[str, Any] | None = None,
    *,
    defaults: Mapping[str, Any] | None = None,
    allowed_env: Sequence[str] = (),
) -> S:
    """The settings: ``args`` > the environment > the file > ``defaults`` > the model's own.

    ``path``: the ``--config`` file; without it, the file ``<PREFIX>CONFIG`` names, if set.
    ``defaults``: values under the file's (``monitor collect --lab``'s cluster name).
    ``allowed_env``: other ``<PREFIX>*`` variables that are not settings but not mistakes.
    Raises :class:`SettingsError` (unknown variable, unreadable file, unknown key in it) or
    pydantic's ValidationError (a value the model refuses).
    """
    env = os.environ
    var = config_file_var(cls)
    bad = unknown_settings_env(cls, allowed_env, env)
    if bad:
        raise SettingsError(f"unknown {what} settings in the environment: {', '.join(bad)}")
    data: dict[str, Any] = {}
    if path is not None:
        label = f"--config {path}"
    elif env.get(var):
        path = Path(env[var])
        label = f"{var}={path}"
    if path is not None:
        data = read_file(path, label)
        unknown = unknown_keys(cls, data)
        if unknown:
            raise SettingsError(f"{label}: unknown {what} setting(s) {', '.join(unknown)}")
    layered = {**(defaults or {}), **data}
    with _file_in_force(layered):
        return cls(**(args or {}))


def describe_error(e: ValidationError, required: Mapping[str, str] | None = None) -> str:
    """A validation error in one line, without the input (it may hold a secret).

    ``required``: for a setting without a default (``kafka.bootstrap_servers``), how to give
    it -- said in place of pydantic's "Field required". A nested model missing as a whole
    (``kafka``) is reported as its required key.

    >>> from pydantic import BaseModel
    >>> class K(BaseModel):
    ...     bootstrap_servers: str
    >>> class C(BaseModel):
    ...     kafka: K
    >>> try:
    ...     C()
    ... except ValidationError as e:
    ...     print(describe_error(e, {"kafka.bootstrap_servers": "--bootstrap HOST:PORT"}))
    kafka.bootstrap_servers is required: --bootstrap HOST:PORT
    """
    hints = required or {}
    parts = []
    for err in e.errors(include_input=False, include_url=False):
        loc = ".".join(str(x) for x in err["loc"])
        if err["type"] == "missing":
            key = next((k for k in hints if k == loc or k.startswith(f"{loc}.")), None)
            if key is not None:
                parts.append(f"{key} is required: {hints[key]}")
                continue
            if loc:
                parts.append(f"{loc} is required")
                continue
        parts.append(f"{loc}: {err['msg']}" if loc else str(err["msg"]))
    return "; ".join(dict.fromkeys(parts))


#: The folder of the monitor's state: under the unit's ``StateDirectory`` (systemd sets
#: ``$STATE_DIRECTORY``), else ``$XDG_STATE_HOME/kafka-replication-monitor``, else
#: ``~/.local/state/kafka-replication-monitor`` (the XDG base directory default).
STATE_APP = "kafka-replication-monitor"


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the job's checkpoint and store and ``monitor run``'s own cluster live when no
    setting names a place: never a path relative to the working folder.

    >>> state_dir({"STATE_DIRECTORY": "/var/lib/krm:/var/lib/other"})
    PosixPath('/var/lib/krm')
    >>> state_dir({"XDG_STATE_HOME": "/s", "HOME": "/h"})
    PosixPath('/s/kafka-replication-monitor')
    >>> state_dir({"HOME": "/h"})
    PosixPath('/h/.local/state/kafka-replication-monitor')
    """
    env = os.environ if environ is None else environ
    unit = env.get("STATE_DIRECTORY", "")
    if unit:
        return Path(unit.split(":")[0])  # systemd joins several with ':'; the first is ours
    xdg = env.get("XDG_STATE_HOME", "")
    if xdg and Path(xdg).is_absolute():  # the spec: a relative one is to be ignored
        return Path(xdg) / STATE_APP
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".local" / "state" / STATE_APP
