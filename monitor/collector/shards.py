"""Several collectors on one cluster: which partitions are this collector's (``shard``).

A cluster of a million partitions is more than one collector process: N collectors share
it, each configured with its shard ``i/N`` (0-based). Each still reads every broker's
exporter page and the whole cluster's metadata, but sends the ``partition`` events (round
records, with their samples) and ``replica`` events of its own shard's partitions only; the
topic events (``topic_config``, ``topic_deleted``) and the ``broker`` events are sent by
every collector (docs/collector.md, "Several collectors on one cluster").

The shard key is the **topic**: a partition belongs to shard ``crc32(topic) mod N``, so a
topic's partitions all come from one collector. The model needs that: it forgets a
partition as deleted only when its topic left the topic reads or when partitions *of its own
topic* went on being listed long after it (``ClusterModel._forget_absent``); with whole
topics per collector, a sibling still listed says the partition's collector lives, and a
dead collector's partitions all fall silent together -- stale, never forgotten. CRC-32 of
the name's UTF-8 bytes, not Python's ``hash`` (salted per process): every collector, on any
host and version, must agree.

>>> Shard.parse("1/4").count, Shard.parse("1/4").index
(4, 1)
>>> shard_of("orders", 1)
0
>>> [shard_of(t, 2) for t in ("orders", "payments", "clicks")]
[0, 0, 1]
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

#: ``i/N``: the i-th (0-based) of N collectors.
SHARD_PATTERN = r"^[0-9]{1,6}/[0-9]{1,6}$"


def shard_of(topic: str, count: int) -> int:
    """The shard (0 .. ``count`` - 1) whose collector sends ``topic``'s partitions."""
    return zlib.crc32(topic.encode("utf-8")) % count


class _HasTopic(Protocol):
    @property
    def topic(self) -> str: ...


_P = TypeVar("_P", bound=_HasTopic)


@dataclass
class Shard:
    """This collector's shard: ``index`` of ``count`` (``0/1``: the whole cluster)."""

    index: int = 0
    count: int = 1
    #: topic -> whether it is this shard's (a round asks for every topic again).
    _mine: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"i/N"`` with 0 <= i < N; a :class:`ValueError` names what is wrong."""
        if not re.fullmatch(SHARD_PATTERN, text):
            raise ValueError(f"{text!r} is not i/N, e.g. 0/2 and 1/2 for two collectors")
        index, count = (int(x) for x in text.split("/"))
        if count < 1:
            raise ValueError(f"{text!r}: N is the number of collectors, at least 1")
        if index >= count:
            raise ValueError(f"{text!r}: i counts from 0 to N-1 ({count - 1} at most)")
        return cls(index, count)

    @property
    def whole(self) -> bool:
        """Whether this collector sends the whole cluster (one shard: no filtering)."""
        return self.count == 1

    def is_mine(self, topic: str) -> bool:
        """Whether ``topic``'s partitions are this shard's."""
        mine = self._mine.get(topic)
        if mine is None:
            if len(self._mine) > 1_000_000:  # topics come and go: never grow for good
                self._mine.clear()
            mine = self._mine[topic] = shard_of(topic, self.count) == self.index
        return mine

    def topics(self, topics: Iterable[str]) -> set[str]:
        """The topics of ``topics`` that are this shard's."""
        return {t for t in topics if self.is_mine(t)}

    def partitions(self, partitions: Iterable[_P]) -> list[_P]:
        """The partitions of ``partitions`` that are this shard's, in their order. The
        metadata lists a topic's partitions together: each topic is looked up once a run."""
        out: list[_P] = []
        last, mine = None, False
        for p in partitions:
            topic = p.topic
            if topic != last:
                last, mine = topic, self.is_mine(topic)
            if mine:
                out.append(p)
        return out

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
