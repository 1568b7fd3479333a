"""Running the real Prometheus and Alertmanager (from Debian's packages) for tests and the
demo: rendered configuration in a work folder, our own ports, stopped by PID."""

from monitor.dev.processes.prom import AlertmanagerProcess, PrometheusProcess, WebhookReceiver

__all__ = ["AlertmanagerProcess", "PrometheusProcess", "WebhookReceiver"]
