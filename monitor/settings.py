"""What the collector's and the job's settings share: refusing what names no setting.

pydantic-settings reads ``<PREFIX><FIELD>`` from the environment and silently ignores any
other variable with the prefix -- so a misspelt ``MONITOR_COLLECTOR_INTERVL_S`` would leave
the default in force with nobody told. Both entry points ask :func:`unknown_env_keys` first
and refuse to start on any.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping


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
