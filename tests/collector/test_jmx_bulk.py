# ruff: noqa: E501  (exporter pages are written as the exporter prints them)
"""Reading a page in bulk (``jmx.parse``) gives exactly what reading it line by line
(``jmx.parse_lines``, the parser before) gives: every reading, every sample left out and
why -- on the exporter's pages, which it reads in bulk, and on any other page, which it
reads line by line."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.jmx_parse_bench import CLIENT, broker_page
from monitor.collector import jmx
from monitor.collector.jmx import PROFILES, JmxNames, parse, parse_lines

NAMES = PROFILES["monitor"]

#: One broker's page as the exporter (1.x) prints it: families sorted by name, each
#: family's series by their labels; a leader's replica (partition 0) has no lag.
REGULAR = """\
# HELP jvm_threads_current Current thread count.
# TYPE jvm_threads_current gauge
jvm_threads_current 93.0
# HELP kafka_controller_activecontrollercount ActiveControllerCount
# TYPE kafka_controller_activecontrollercount gauge
kafka_controller_activecontrollercount 1.0
# HELP kafka_log_log_end_offset Log end offset.
# TYPE kafka_log_log_end_offset gauge
kafka_log_log_end_offset{partition="0",topic="orders"} 1.2345678E7
kafka_log_log_end_offset{partition="1",topic="orders"} 226.0
kafka_log_log_end_offset{partition="10",topic="orders"} 0.0
# HELP kafka_log_log_start_offset Log start offset.
# TYPE kafka_log_log_start_offset gauge
kafka_log_log_start_offset{partition="0",topic="orders"} 100.0
kafka_log_log_start_offset{partition="1",topic="orders"} 0.0
kafka_log_log_start_offset{partition="10",topic="orders"} 0.0
# HELP kafka_server_replica_fetcher_lag Follower lag.
# TYPE kafka_server_replica_fetcher_lag gauge
kafka_server_replica_fetcher_lag{client_id="ReplicaFetcherThread-0-2",partition="1",topic="orders"} 3.0
kafka_server_replica_fetcher_lag{client_id="ReplicaFetcherThread-0-3",partition="10",topic="orders"} -1.0
# HELP kafka_server_replica_manager_isrshrinkspersec ISR shrinks.
# TYPE kafka_server_replica_manager_isrshrinkspersec counter
kafka_server_replica_manager_isrshrinkspersec_total 4.0
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.693829439767E9
"""


def _same(text: str, names: JmxNames = NAMES) -> jmx.BrokerScrape:
    """``parse(text)``, checked equal to ``parse_lines(text)`` in every part."""
    bulk, lines = parse(text, names), parse_lines(text, names)
    assert bulk.replicas == lines.replicas
    assert bulk.counters == lines.counters
    assert bulk.started_at == lines.started_at
    assert bulk.dropped == lines.dropped
    assert list(bulk.leo) == list(lines.leo)  # the page's order: the order of the events
    return bulk


def _in_bulk(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], jmx.BrokerScrape]:
    """``parse``, failing if it reads the page line by line."""
    lines = jmx.parse_lines

    def refused(text: str, names: JmxNames) -> jmx.BrokerScrape:
        raise AssertionError("read line by line")

    def bulk(text: str) -> jmx.BrokerScrape:
        monkeypatch.setattr(jmx, "parse_lines", refused)
        try:
            return jmx.parse(text, NAMES)
        finally:
            monkeypatch.setattr(jmx, "parse_lines", lines)

    return bulk


def test_the_exporters_page_is_read_in_bulk(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _in_bulk(monkeypatch)(REGULAR)
    assert s.replicas == {
        ("orders", 0): (12_345_678, 100, None),
        ("orders", 1): (226, 0, 3),
        ("orders", 10): (0, 0, None),  # ConsumerLag's -1: not fetched yet
    }
    assert s.counters == {"active_controller": 1, "isr_shrinks_total": 4}
    assert s.started_at == 1_693_829_439_767 and s.dropped == {"unknown_lag": 1}
    _same(REGULAR)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_the_benchmarks_pages_are_read_in_bulk(
    monkeypatch: pytest.MonkeyPatch, profile: str
) -> None:
    """The page ``bench.jmx_parse_bench`` times, in each profile's names."""
    names = PROFILES[profile]
    text = broker_page(names, CLIENT[profile], 300)
    monkeypatch.setattr(jmx, "parse_lines", lambda *a: pytest.fail("read line by line"))
    s = parse(text, names)
    assert len(s.leo) == 300 and len(s.fetch_lag) == 200 and s.started_at
    monkeypatch.undo()
    _same(text, names)


@pytest.mark.parametrize(
    "change",
    [
        # Each makes the page one the bulk reading does not take: read line by line.
        ('{partition="1",topic="orders"} 226.0', '{topic="orders",partition="1"} 226.0'),
        ('{partition="1",topic="orders"} 226.0', '{partition="01",topic="orders"} 226.0'),
        (
            '{partition="1",topic="orders"} 226.0',
            '{partition="1",topic="orders"} 226.0 1700000000000',
        ),
        ('{partition="1",topic="orders"} 226.0', '{partition="1",topic="or\\"ders"} 226.0'),
        ('{partition="1",topic="orders"} 0.0', '{partition="1",topic="orders",extra="x"} 0.0'),
        (  # the first one left out, then read: the value read, and one left out
            'start_offset{partition="0",topic="orders"} 100.0',
            'start_offset{partition="0",topic="orders"} NaN\nkafka_log_log_start_offset{partition="0",topic="orders"} 100.0',
        ),
        (  # read, then left out: the value read, and one left out
            'offset{partition="10",topic="orders"} 0.0\n#',
            'offset{partition="10",topic="orders"} 0.0\nkafka_log_log_end_offset{partition="10",topic="orders"} NaN\n#',
        ),
        ("\n", "\r\n"),
        ('client_id="ReplicaFetcherThread-0-2"', 'clientId="ReplicaFetcherThread-0-2"'),
        ('topic="orders"} 3.0', 'topic="orders"} 3.0 '),
        ('partition="0",topic="orders"} 100.0', 'partition="0",topic="other"} 100.0'),
    ],
    ids=[
        "label-order",
        "partition-written-otherwise",
        "timestamp",
        "escaped-quote",
        "extra-label",
        "log-start-twice",
        "log-end-twice",
        "crlf",
        "another-client-label",
        "trailing-space",
        "log-start-of-no-log-end",
    ],
)
def test_any_other_shape_reads_as_line_by_line(change: tuple[str, str]) -> None:
    text = REGULAR.replace(change[0], change[1], 1)
    assert text != REGULAR
    _same(text)


@pytest.mark.parametrize(
    ("old", "new", "dropped"),
    [
        ("1.2345678E7", "NaN", {"not_finite": 1}),
        ("1.2345678E7", "+Inf", {"not_finite": 1}),
        ("226.0", "-5.0", {"negative": 1}),
        ("226.0", "1.8446744073709552E19", {"out_of_range": 1}),
        ("226.0", "9.223372036854775807E18", {"out_of_range": 1}),
        ("226.0", "abc", {"unreadable": 1}),
        ("100.0", "NaN", {"not_finite": 1}),
        ("3.0", "-1.0", {"unknown_lag": 1}),
        ("3.0", "x", {"unreadable": 1}),
    ],
)
def test_bad_values_in_bulk_are_left_out_and_counted_as_line_by_line(
    monkeypatch: pytest.MonkeyPatch, old: str, new: str, dropped: dict[str, int]
) -> None:
    text = REGULAR.replace(f"}} {old}\n", f"}} {new}\n", 1)
    s = _in_bulk(monkeypatch)(text)
    assert s.dropped == Counter({"unknown_lag": 1}) + Counter(dropped)  # REGULAR's, and this
    _same(text)


def test_a_family_amid_another_is_read_in_bulk_all_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Lines of other series amid a family's (not the exposition format, which groups a
    family's lines): still read in bulk, none of them missed."""
    text = REGULAR.replace(
        'kafka_log_log_end_offset{partition="1",topic="orders"} 226.0\n',
        'kafka_log_log_end_offset{partition="1",topic="orders"} 226.0\n'
        "kafka_server_replica_manager_isrexpandspersec_total 9.0\n"
        'kafka_log_log_start_offset{partition="7",topic="orders"} 1.0\n',
    )
    s = _in_bulk(monkeypatch)(text)
    assert s.counters["isr_expands_total"] == 9 and s.replicas[("orders", 7)] == (None, 1, None)
    _same(text)


def test_a_fetcher_moving_a_log_between_directories_is_no_followers_lag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = REGULAR.replace(
        'kafka_server_replica_fetcher_lag{client_id="ReplicaFetcherThread-0-3"',
        'kafka_server_replica_fetcher_lag{client_id="ReplicaAlterLogDirsThread-0",partition="0",topic="orders"} 900.0\n'
        'kafka_server_replica_fetcher_lag{client_id="ReplicaFetcherThread-0-3"',
    )
    s = _in_bulk(monkeypatch)(text)
    assert s.replicas[("orders", 0)] == (12_345_678, 100, None)
    _same(text)


def test_log_starts_and_lags_of_partitions_without_a_log_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kept as line by line keeps them (no event is built from them), their bad values
    counted."""
    text = REGULAR.replace(
        'kafka_log_log_start_offset{partition="10",topic="orders"} 0.0',
        'kafka_log_log_start_offset{partition="10",topic="orders"} 0.0\n'
        'kafka_log_log_start_offset{partition="11",topic="orders"} NaN\n'
        'kafka_log_log_start_offset{partition="12",topic="orders"} 8.0',
    ).replace(
        'client_id="ReplicaFetcherThread-0-3",partition="10",topic="orders"} -1.0',
        'client_id="ReplicaFetcherThread-0-3",partition="10",topic="orders"} -1.0\n'
        'kafka_server_replica_fetcher_lag{client_id="ReplicaFetcherThread-0-3",partition="12",topic="orders"} 4.0',
    )
    s = _in_bulk(monkeypatch)(text)
    assert s.replicas[("orders", 12)] == (None, 8, 4)
    assert ("orders", 11) not in s.replicas  # nothing read of it
    assert ("orders", 12) not in s.leo and s.log_start[("orders", 12)] == 8
    _same(text)


# -- any page -----------------------------------------------------------------------------

_TOPICS = st.sampled_from(["orders", "t", "a.b-c_d", "x y", "t}x", "b\\\\s", 'q\\"q', ""])
_PARTITIONS = st.sampled_from(["0", "1", "7", "10", "07", "-1", "x", "\u0663", "1_0"])
_VALUES = st.sampled_from(
    [
        "0.0", "1.0", "226.0", "1.2345678E7", "-1.0", "-5.0", "NaN", "+Inf", "-Inf",
        "1.8446744073709552E19", "9.223372036854775807E18", "x", "", "1e3", "5 17", "3.0}",
        "7",
    ]
)  # fmt: skip
_CLIENTS = st.sampled_from(
    ["ReplicaFetcherThread-0-2", "ReplicaFetcherThread-1-3", "ReplicaAlterLogDirsThread-0"]
)


@st.composite
def _series(draw: st.DrawFn) -> str:
    """One line of a per-partition family, mostly of the exporter's shape."""
    name = draw(st.sampled_from([NAMES.log_end_offset, NAMES.log_start_offset, NAMES.fetcher_lag]))
    labels = [f'partition="{draw(_PARTITIONS)}"', f'topic="{draw(_TOPICS)}"']
    if name == NAMES.fetcher_lag:
        label = draw(st.sampled_from(["client_id", "client_id", "clientId"]))
        labels.insert(0, f'{label}="{draw(_CLIENTS)}"')
    shape = draw(st.sampled_from(["sorted"] * 6 + ["reversed", "comma", "extra", "lone"]))
    if shape == "reversed":
        labels.reverse()
    elif shape == "extra":
        labels.append('x="y"')
    elif shape == "lone":
        labels = labels[-1:]
    text = ",".join(labels) + ("," if shape == "comma" else "")
    return f"{name}{{{text}}} {draw(_VALUES)}"


_OTHER_LINES = st.sampled_from(
    [
        "# HELP kafka_log_log_end_offset Log end offset.",
        "# TYPE kafka_log_log_end_offset gauge",
        "",
        "jvm_threads_current 93.0",
        f"{NAMES.isr_shrinks} 4.0",
        f"{NAMES.isr_expands} NaN",
        f'{NAMES.active_controller}{{x="y"}} 1.0',
        f"{NAMES.unclean_elections} 2.0 1700000000",
        f"{NAMES.process_start} 1.7E9",
        f"{NAMES.process_start} x",
        f"{NAMES.log_end_offset} 5.0",
        f"{NAMES.isr_shrinks}_other 1.0",
        NAMES.process_start,  # a name, nothing after it: no sample
        f'{NAMES.isr_expands}{{x="1"}} 3.0',
    ]
)


@st.composite
def _pages(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.one_of(_series(), _OTHER_LINES), max_size=30))
    if draw(st.booleans()):  # as the exporter: a family's lines together
        lines.sort(key=lambda line: line.split("{", 1)[0])
    text = "\n".join(lines)
    if draw(st.booleans()):
        text += "\n"
    return text.replace("\n", draw(st.sampled_from(["\n", "\n", "\r\n", "\x85"])))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_pages())
def test_any_page_reads_as_line_by_line(text: str) -> None:
    _same(text)


#: Values as the exporter writes them (Java's Double.toString), and others: the last ones
#: end with ".0" as the former under 10^7 do, but are not what int() of their digits gives
#: (beyond 2^53, negative) or are no number.
_EXPORTED = [
    "0.0", "7.0", "226.0", "1.2345678E7", "1.0E7", "-1.0", "NaN", "+Inf", "x",
    "9007199254740993.0", "9.007199254740993E15", "+5.0", "1_0.0", "\u0663.0", "-0.0", "1.0.0",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    replicas=st.lists(
        st.tuples(
            st.sampled_from(["orders", "t", "a.b"]),
            st.integers(0, 30),
            st.sampled_from(_EXPORTED),
            st.one_of(st.none(), st.sampled_from(_EXPORTED)),
            st.one_of(st.none(), _CLIENTS),
        ),
        max_size=20,
        unique_by=lambda r: (r[0], r[1]),
    ),
    start_missing=st.sets(st.integers(0, 19)),
)
def test_exporter_shaped_pages_read_as_line_by_line(
    replicas: list[tuple[str, int, str, str | None, str | None]], start_missing: set[int]
) -> None:
    """Pages of the exporter's shape (the bulk reading's), their values and which series
    each replica has drawn at random."""
    ends, starts, lags = [], [], []
    for i, (topic, p, value, lag, client) in enumerate(
        sorted(replicas, key=lambda r: (str(r[1]), r[0]))
    ):
        labels = f'partition="{p}",topic="{topic}"'
        ends.append(f"{NAMES.log_end_offset}{{{labels}}} {value}")
        if i not in start_missing:
            starts.append(f"{NAMES.log_start_offset}{{{labels}}} {value}")
        if lag is not None and client is not None:
            lags.append(f'{NAMES.fetcher_lag}{{client_id="{client}",{labels}}} {lag}')
    _same(
        "\n".join(["# TYPE x gauge", *ends, *starts, *sorted(lags), f"{NAMES.isr_shrinks} 1.0"])
        + "\n"
    )
