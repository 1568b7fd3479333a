"""The rule helpers' fast forms give the answers of their plain forms."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.model.partition import _leader_passed
from monitor.model.rules import time_behind
from monitor.model.state import PartitionState


@st.composite
def rising_history(draw: st.DrawFn) -> list[int]:
    """A leader's LEO history whose times and LEOs never go down (ties included)."""
    n = draw(st.integers(0, 34))
    steps = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=n, max_size=n))
    t, leo, flat = draw(st.integers(0, 5)), draw(st.integers(0, 5)), []
    for dt, dleo in steps:
        t, leo = t + dt, leo + dleo
        flat += [t, leo]
    return flat


@settings(max_examples=3000, deadline=None)
@given(rising_history(), st.integers(-1, 110), st.integers(-1, 110))
def test_time_behind_from_the_end_on_a_rising_history(
    history: list[int], offset: int, at: int
) -> None:
    """On a history that never goes down, the scan from the newest sample finds the sample
    the scan from the oldest finds (the model asks it ~6 times a partition-round)."""
    assert time_behind(history, offset, at, rising=True) == time_behind(history, offset, at)


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(-1, 40), st.booleans()), max_size=50),
    st.integers(-1, 45),
    st.integers(-1, 45),
)
def test_a_partition_knows_when_its_leader_history_rises(
    appended: list[tuple[int, int, bool]], offset: int, at: int
) -> None:
    """Whatever a leader's samples do (times or LEOs going back, resets on a new
    leadership, the oldest dropped past the limit), the state's ``leader_leos_rising``
    lets the model ask the fast form only when it gives the plain form's answer."""
    s = PartitionState("c", "t", 0)
    for t, leo, reset in appended:
        if reset:
            s.reset_leader_leo(t, leo)
        elif leo >= 0:
            s.record_leader_leo(t, leo, limit=8)
        h = s.leader_leos
        assert time_behind(h, offset, at, s.leader_leos_rising) == time_behind(h, offset, at)


#: Steps of a leader's samples: mostly small, sometimes past what 32 bits hold.
_STEP = st.one_of(st.integers(-3, 40), st.sampled_from([2**31 - 1, 2**31, 2**32 + 7, -(2**31)]))


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(st.tuples(_STEP, _STEP, st.booleans()), max_size=40),
    st.integers(0, 2**34),
    st.integers(0, 2**34),
)
def test_the_leader_history_kept_relative_answers_as_the_absolute_one(
    appended: list[tuple[int, int, bool]], offset: int, at: int
) -> None:
    """The leader's samples are kept as 32-bit offsets from a base (8 B a sample, not 16),
    rebased -- or widened to 64 bits -- when one does not fit: a leadership of weeks, a log
    grown by 2^31 offsets. Whatever the jumps, the model's answer is the one the absolute
    samples give, and a new leadership starts narrow again."""
    s = PartitionState("c", "t", 0)
    t, leo = 1_700_000_000_000, 0
    absolute: list[int] = []
    for dt, dleo, reset in appended:
        t, leo = t + dt, max(0, leo + dleo)
        if reset:
            s.reset_leader_leo(t, leo)
            absolute = [t, leo]
            assert s.leader_leos.itemsize == 4
        else:
            s.record_leader_leo(t, leo, limit=8)
            absolute = [*absolute, t, leo][-16:]
        assert (s.leader_last_at(), s.leader_last_leo()) == (absolute[-2], absolute[-1])
        probe_offset, probe_at = leo - offset % 64, t - at % 64
        assert _leader_passed(s, probe_offset, probe_at) == time_behind(
            absolute, probe_offset, probe_at
        )
        assert _leader_passed(s, offset, at) == time_behind(absolute, offset, at)
