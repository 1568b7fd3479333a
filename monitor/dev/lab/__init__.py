"""The lab: a real local 3-node Kafka 4.x KRaft cluster with fault injection (docs/lab.md).

Public API::

    from monitor.dev.lab import Lab, LabConfig
    with Lab(LabConfig(dir=..., base_port=29092)) as lab:
        lab.pause(3); lab.resume(3); lab.kill(1); lab.start(1)
        lab.bootstrap_servers, lab.jmx_urls

:class:`Lab` (``cluster``) is made of ``statefile`` (``lab.json`` and its lock), ``jvm`` (a
node's files, storage format and command line), ``nodes`` (the JVMs by pid), ``readiness``
and ``collector_file``; ``config`` holds :class:`LabConfig` and the files rendered from it.
Helpers live in the other submodules: ``admin`` (typed kafka-python wrappers), ``load``
(acknowledged-produce log and loss verification), ``metrics`` (exporter scraping),
``ports`` (free port blocks for parallel test sessions); the Maven jar sets are
``monitor.jars``.
"""

from monitor.dev.lab.cluster import Lab
from monitor.dev.lab.config import LabConfig
from monitor.dev.lab.errors import LabError
from monitor.dev.lab.nodes import NodeInfo, NodeStatus
from monitor.dev.lab.statefile import LabState

__all__ = ["Lab", "LabConfig", "LabError", "LabState", "NodeInfo", "NodeStatus"]
