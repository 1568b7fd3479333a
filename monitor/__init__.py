"""Kafka replication monitor.

The pipeline is collect -> transport -> model -> export / alert / query:

- ``monitor.model``: the watermark model, pure Python (no Spark, Kafka, clock or I/O);
- ``monitor.contract.events``: the telemetry event contract (pydantic, schema version 1);
- ``monitor.dev.lab``: a real local KRaft cluster started from Maven jars, with fault commands;
- ``monitor.commands``: the CLI commands (``monitor --help``).
"""

__version__ = "0.1.0"
