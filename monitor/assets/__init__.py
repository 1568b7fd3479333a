"""The files the product ships beside its code, read from the installed package.

Everything here travels in the wheel as package data and is read with
:mod:`importlib.resources` -- never with a path into a source tree -- so an installed
``monitor`` finds the same files as a checkout::

    prometheus/rules/*.yml       alerting and recording rules (defaults: see rules.py)
    prometheus/tests/*.yml       their promtool unit tests (for the default values)
    alertmanager/route.yml       the route and inhibitions to merge into an Alertmanager config
    jmx-exporter/*.yaml          JMX exporter rules for the brokers (docs/collector.md)
    pom.xml                      the Maven POM that resolves the jars (monitor.jars)
    scenarios/*.jsonl            recorded incidents to replay (in a checkout: tests/data)

``monitor assets list`` prints the names, ``monitor assets export DIR`` copies them out.
The dashboards are the ``dashboards`` package's own data (``dashboards/json``).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path


def checkout_root() -> Path | None:
    """The source checkout this package runs from, or None for an installed wheel."""
    top = Path(__file__).resolve().parents[2]
    if (top / "pyproject.toml").is_file() and (top / "monitor" / "assets").is_dir():
        return top
    return None


def root() -> Traversable:
    """The assets folder of the installed package."""
    return resources.files(__name__)


def read_text(name: str) -> str:
    """One asset's text; ``name`` is its path below the assets folder (``pom.xml``,
    ``prometheus/rules/replication.yml``). A missing asset names itself."""
    node = root().joinpath(*name.split("/"))
    if not node.is_file():
        raise FileNotFoundError(f"asset {name!r} is not in this installation of monitor")
    return node.read_text(encoding="utf-8")


def names() -> list[str]:
    """Every asset's name, sorted."""

    def walk(node: Traversable, prefix: str) -> Iterator[str]:
        for child in node.iterdir():
            if child.name.endswith(".py") or child.name.startswith((".", "__pycache__")):
                continue  # the package's own code and caches, not assets
            name = f"{prefix}{child.name}"
            if child.is_dir():
                yield from walk(child, name + "/")
            else:
                yield name

    return sorted(walk(root(), ""))


def export(dest: Path) -> list[Path]:
    """Copy every asset below ``dest`` (folders as above); returns the files written."""
    written = []
    for name in names():
        target = dest.joinpath(*name.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        with resources.as_file(root().joinpath(*name.split("/"))) as source:
            shutil.copyfile(source, target)
        written.append(target)
    return written
