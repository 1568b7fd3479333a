"""HTTP(S) for both ``/metrics``: the server (:mod:`monitor.web.server`) and the Prometheus
web configuration file it takes (:mod:`monitor.web.config`)."""

from monitor.web.config import WebConfig, WebConfigError, load
from monitor.web.server import CONTENT_TYPE, WebServer

__all__ = ["CONTENT_TYPE", "WebConfig", "WebConfigError", "WebServer", "load"]
