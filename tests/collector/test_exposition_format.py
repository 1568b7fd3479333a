# ruff: noqa: E501  (exporter pages are written as the exporter prints them)
"""An exporter page read as the text format defines it (issue 50): prometheus' exposition
format spec and ``prometheus_client``'s parser are the references. Each case is read in
bulk and line by line with the same result (``test_jmx_bulk._same``); each failed on the
parser before.
"""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.collector import jmx
from monitor.collector.jmx import PROFILES, parse, parse_lines
from tests.collector.test_jmx_bulk import REGULAR, _same

NAMES = PROFILES["monitor"]
LEO = "kafka_log_log_end_offset"


def _leo(line: str) -> jmx.BrokerScrape:
    return _same(REGULAR + line + "\n")


def test_a_sample_with_a_timestamp_reads_its_value_not_its_timestamp() -> None:
    """``name{...} value timestamp`` is legal; the value is the second field (before: the
    timestamp was read as a log end of 1,700,000,000,000)."""
    page = _leo(f'{LEO}{{partition="5",topic="orders"}} 100.0 1700000000000')
    assert page.leo[("orders", 5)] == 100
    (family,) = [
        f
        for f in text_string_to_metric_families(
            f'{LEO}{{partition="5",topic="orders"}} 100.0 1700000000000\n'
        )
    ]
    assert family.samples[0].value == 100.0  # the reference reads it so


@pytest.mark.parametrize(("first", "second"), [("100.0", "5.0"), ("5.0", "0.0"), ("5.0", "5.0")])
def test_a_series_listed_twice_is_dropped_and_counted_never_last_wins(
    first: str, second: str
) -> None:
    """Two samples of one series: no telling which is true -- both left out, counted
    (before: the last won, log end 100 then 5 gave 5, uncounted)."""
    page = _same(
        REGULAR
        + f'{LEO}{{partition="7",topic="orders"}} {first}\n'
        + f'{LEO}{{partition="7",topic="orders"}} {second}\n'
    )
    assert ("orders", 7) not in page.leo
    assert page.dropped["duplicate"] == 2
    assert page.leo[("orders", 1)] == 226  # the rest of the page is read


def test_a_counter_listed_twice_is_dropped() -> None:
    page = _same(REGULAR + "kafka_server_replica_manager_isrshrinkspersec_total 0.0\n")
    assert "isr_shrinks_total" not in page.counters and page.dropped["duplicate"] == 2


@pytest.mark.parametrize("partition", ["1_0", "\u0661", " +3", "+3", "03x", "-1", ""])
def test_a_partition_label_is_ascii_digits_or_unreadable(partition: str) -> None:
    """``int()`` read "1_0" as 10, an Arabic-Indic digit as 1, " +3" as 3."""
    page = parse_lines(REGULAR + f'{LEO}{{partition="{partition}",topic="x"}} 5.0\n', NAMES)
    assert [k for k in page.leo if k[0] == "x"] == []
    assert page.dropped["unreadable"] == 1


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("1.9", "not_integer"),
        ("1_0", "unreadable"),
        ("\u0661", "unreadable"),
        ("1e17", "imprecise"),
        ("9.007199254740993E15", "imprecise"),
        ("9223372036854775808", "out_of_range"),
    ],
)
def test_an_offset_is_a_whole_number_read_exactly(value: str, reason: str) -> None:
    """A value 1.9 was read as 1; above 2^53 a float was rounded."""
    page = _leo(f'{LEO}{{partition="5",topic="orders"}} {value}')
    assert ("orders", 5) not in page.leo and page.dropped[reason] == 1


def test_an_offset_above_2_53_written_in_digits_is_exact() -> None:
    page = _leo(f'{LEO}{{partition="5",topic="orders"}} 9007199254740993')
    assert page.leo[("orders", 5)] == 2**53 + 1


def test_escapes_in_label_values_are_read() -> None:
    r"""``\"``, ``\\`` and ``\n`` in a label value (a fetcher's client id may hold any)."""
    page = _same(
        REGULAR
        + 'kafka_server_replica_fetcher_lag{client_id="a\\"b\\\\c",partition="0",topic="orders"} 7.0\n'
    )
    assert page.fetch_lag[("orders", 0)] == 7


@pytest.mark.parametrize("size", [5_000, 80_000])
def test_an_unclosed_label_is_one_unreadable_line(size: int) -> None:
    """An unclosed label of any size is one line left out (before: quadratic -- 40 kB took
    12 s, holding the interpreter lock; its time is bench.jmx_parse_bench --adversarial's)."""
    line = f'{LEO}{{partition="5",topic="' + "a" * size + "\n"
    page = parse(REGULAR + line, NAMES)
    assert page.dropped["unreadable"] == 1 and page.leo[("orders", 1)] == 226
