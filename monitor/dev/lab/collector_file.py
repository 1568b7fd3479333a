"""``<dir>/collector.json``: the collector's configuration for a lab, written at every `up`."""

from __future__ import annotations

import json

from monitor.dev.lab import security
from monitor.dev.lab.config import LabConfig


def collector_config(config: LabConfig) -> dict[str, object]:
    """A ``monitor collect --config`` file's content for this lab: every broker, its
    exporters, and on a secured lab its ``SECURE`` listener with secrets as files."""
    cfg = config
    kafka: dict[str, object] = {"bootstrap_servers": cfg.bootstrap_servers}
    if cfg.secured:
        kafka = security.kafka_settings(cfg.dir, cfg.security, cfg.secure_bootstrap_servers)
    return {
        "cluster": "lab",
        "kafka": kafka,
        # `monitor collect --lab DIR` publishes on the lab itself, as asked for explicitly
        # here (the demo and the soak give the monitor a cluster of its own).
        "events_on_watched_cluster": True,
        "jmx_urls": {str(n): cfg.jmx_url(n) for n in cfg.node_ids},
    }


def write_collector_config(config: LabConfig) -> None:
    """``<dir>/collector.json``: what ``monitor collect --lab DIR`` reads."""
    path = config.dir / "collector.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(collector_config(config), indent=2) + "\n")
    tmp.replace(path)
