"""The lab's state file (``<dir>/lab.json``) and the lock that serialises changes to it.

Why a state file: `up`, `kill 2` and `down` are separate processes (CLI calls, a pytest
session), so the cluster id and one pid per node must be on disk. Every process acting on
the same lab folder changes the file under ``<dir>/lab.lock`` (``flock``), re-reading it
first, and replaces it atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, Field, model_validator

from monitor.dev.lab.config import LabConfig


class NodeState(BaseModel):
    """What the state file remembers about one node."""

    node: int
    pid: int | None = None
    started_at: float | None = None


class LabState(BaseModel):
    """The state file (``<dir>/lab.json``)."""

    config: LabConfig
    cluster_id: str
    kafka_version: str
    jmx_exporter_version: str
    nodes: dict[int, NodeState] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _version_of_older_files(cls, data: Any) -> Any:
        """A state file from before ``LabConfig.kafka_version`` (the lab then ran one
        version) keeps the version it recorded, not today's default: found by review, such
        a lab could not even be stopped (``lab down`` refused another version)."""
        if isinstance(data, dict) and isinstance(data.get("config"), dict):
            config = data["config"]
            if "kafka_version" not in config and "kafka_version" in data:
                data = {**data, "config": {**config, "kafka_version": data["kafka_version"]}}
        return data


class StateFile:
    """``<dir>/lab.json`` of one lab, and the last state read or written (``state``)."""

    def __init__(self, config: LabConfig) -> None:
        self.config = config
        self.state: LabState | None = self.read()

    def read(self) -> LabState | None:
        """The state on disk now (None before the first `up`)."""
        path = self.config.state_path
        if not path.is_file():
            return None
        return LabState.model_validate_json(path.read_text())

    def current(self) -> LabState | None:
        """The state on disk, else the one this process holds."""
        return self.read() or self.state

    def write(self) -> None:
        assert self.state is not None
        path = self.config.state_path
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(self.state.model_dump_json(indent=2))
        tmp.replace(path)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Serialise state changes between processes acting on the same lab folder."""
        self.config.dir.mkdir(parents=True, exist_ok=True)
        with (self.config.dir / "lab.lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                self.state = self.read() or self.state
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
