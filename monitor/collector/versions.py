"""What the collector trusts of a Kafka version.

The controller's ``UncleanLeaderElectionsPerSec`` counter is a witness of unclean
elections only where Kafka counts them correctly (``docs/findings.md``, "Which witness
says an election was unclean"):

* KRaft before 4.1.0 counted some clean elections as unclean: a reassignment whose joining
  replica becomes ISR member and leader in one change (KAFKA-19212, fixed in 4.1.0), and on
  3.9 with ELR, an election from the ELR (KAFKA-18940, fixed in 4.0.0).
* ZooKeeper-mode clusters (3.x) count only the unclean path: correct, but a ZooKeeper
  cluster cannot be told from a KRaft one by its API versions: say ``unclean_counter = "on"``.

The broker's version is what kafka-python infers from its ApiVersions answer: a broker
that serves Produce v13 is 4.1 or later.

>>> trust_unclean_counter("auto", (4, 1))
(True, 'Kafka 4.1+ counts unclean elections correctly')
>>> trust_unclean_counter("auto", (4, 0))[0]
False
>>> trust_unclean_counter("on", None)[0]
True
"""

from __future__ import annotations

from typing import Any, Literal

UncleanCounter = Literal["auto", "on", "off"]

#: The first release whose controller counts unclean elections correctly in KRaft mode.
COUNTS_CORRECTLY_FROM = (4, 1)


def broker_version(admin: Any) -> tuple[int, ...] | None:
    """The broker version kafka-python inferred at bootstrap (None if it did not say).

    kafka-python 3 keeps it on the admin client's connection manager (not a promised
    interface); a client configured with ``api_version`` says it there. Anything else is
    None.
    """
    manager = getattr(admin, "_manager", None)
    version = getattr(manager, "broker_version", None)
    if version is None:
        config = getattr(admin, "config", None)
        version = config.get("api_version") if isinstance(config, dict) else None
    if isinstance(version, tuple) and all(isinstance(v, int) for v in version):
        return version
    return None


def trust_unclean_counter(
    setting: UncleanCounter, version: tuple[int, ...] | None
) -> tuple[bool, str]:
    """Whether to forward the controller's unclean-election counter, and why (for the log)."""
    if setting == "on":
        return True, "unclean_counter = on (a ZooKeeper cluster, or a version known to count)"
    if setting == "off":
        return False, "unclean_counter = off"
    if version is None:
        return False, "the brokers' version is unknown (set unclean_counter = on to use it)"
    shown = ".".join(map(str, version))
    if version >= COUNTS_CORRECTLY_FROM:
        return True, "Kafka 4.1+ counts unclean elections correctly"
    return False, (
        f"Kafka {shown} in KRaft mode miscounts some clean elections as unclean "
        "(KAFKA-19212, fixed in 4.1.0); set unclean_counter = on for a ZooKeeper cluster"
    )
