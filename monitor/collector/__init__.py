"""The telemetry collector: broker JMX (through the Prometheus JMX exporter) + Admin API ->
validated contract events -> the events topic."""

from monitor.collector.collector import Collector, RoundResult
from monitor.collector.config import CollectorConfig

__all__ = ["Collector", "CollectorConfig", "RoundResult"]
