"""The floor of a columnar steady round: its arithmetic over one bucket's arrays, in numpy.

    python -m bench.columnar_floor_bench [--partitions 15600] [--rounds 40]

Not the model, and no finding comes out of it: a measure of what the design sketched in
``docs/streaming.md`` ("Toward half the ceiling") would pay per partition-round at the
least, to set beside today's Python side (~43 µs of CPU a round at a million partitions).
Per round, over every partition of a bucket (RF 3, the leader in replica slot 0):

* which rounds are steady: leader, epoch and ISR (a bit mask) as held;
* the samples' LEOs and stamps into the replica columns, the leader's LEO pushed onto its
  history (a ring of ``LEO_HISTORY`` rows of (time, LEO));
* each follower's and the HW's lag in offsets and in time -- when the leader's log first
  passed the follower's LEO (the newest history entry at or below it, then the next), as
  ``monitor.model.rules.time_behind`` finds it for a rising history;
* the masks that send a round to the pure model: lagging by the default thresholds, an
  open condition, not steady.

CPU per partition-round, best of ``--rounds`` rounds after a warm-up, one process. Then,
untimed, every partition's lags are checked against ``rules.time_behind`` (the model's own
function) over the same history: the bench fails rather than measure a cheaper quantity.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from monitor.model import ModelConfig, rules

LEO_HISTORY = 32


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.columnar_floor_bench", description=__doc__)
    ap.add_argument("--partitions", type=int, default=15_600)
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args(argv)
    n, rf, cfg = args.partitions, 3, ModelConfig()
    rng = np.random.default_rng(1)

    # The bucket's columns.
    leader = np.zeros(n, np.int32)
    epoch = np.ones(n, np.int32)
    isr_mask = np.full(n, 0b111, np.int16)
    open_count = np.zeros(n, np.int16)
    rep_leo = np.zeros((n, rf), np.int64)
    rep_at = np.zeros((n, rf), np.int64)
    hist_t = np.zeros((n, LEO_HISTORY), np.int64)
    hist_leo = np.zeros((n, LEO_HISTORY), np.int64)
    head = 0  # the ring's newest row (every partition samples its leader each round)
    hw = np.zeros(n, np.int64)
    lag_offsets = np.zeros((n, rf - 1), np.int64)
    lag_ms = np.zeros((n, rf - 1), np.int64)
    hw_lag_ms = np.zeros(n, np.int64)
    rows = np.arange(n)

    def one_round(r: int) -> int:
        nonlocal head
        t = 1_700_000_000_000 + r * 30_000
        # The round's input, as typed columns would hand it over.
        in_leader = leader.copy()
        in_epoch = epoch.copy()
        in_isr = isr_mask.copy()
        grow = rng.integers(0, 500, n)
        new_leader_leo = hist_leo[rows, head] + grow
        in_leo = np.empty((n, rf), np.int64)
        in_leo[:, 0] = new_leader_leo
        in_leo[:, 1:] = new_leader_leo[:, None] - rng.integers(0, 3, (n, rf - 1))
        in_at = np.full((n, rf), t, np.int64)
        in_hw = new_leader_leo - rng.integers(0, 3, n)

        started = time.process_time()
        steady = (in_leader == leader) & (in_epoch == epoch) & (in_isr == isr_mask)
        rep_leo[:] = in_leo
        rep_at[:] = in_at
        head = (head + 1) % LEO_HISTORY
        hist_t[:, head] = t
        hist_leo[:, head] = new_leader_leo
        hw[:] = in_hw
        # Lag in time: the oldest history entry above the follower's LEO, searched from
        # the newest back (a rising history), i.e. the first passing after the newest <=.
        order = (np.arange(LEO_HISTORY) + head + 1) % LEO_HISTORY  # oldest .. newest
        leos = hist_leo[:, order]
        times = hist_t[:, order]
        leader_now = leos[:, -1]
        for j in range(rf - 1):
            leo = rep_leo[:, j + 1]
            lag_offsets[:, j] = np.maximum(0, leader_now - leo)
            passed = leos > leo[:, None]
            first = passed.argmax(axis=1)
            behind = passed[rows, first]
            lag_ms[:, j] = np.where(behind, t - times[rows, first], 0)
        passed = leos > hw[:, None]
        first = passed.argmax(axis=1)
        hw_lag_ms[:] = np.where(passed[rows, first], t - times[rows, first], 0)
        lagging = (lag_ms > cfg.follower_lag_ms).any(axis=1) | (hw_lag_ms > cfg.hw_lag_ms)
        if cfg.follower_lag_offsets is not None:  # off by default
            lagging |= (lag_offsets > cfg.follower_lag_offsets).any(axis=1)
        to_model = ~steady | lagging | (open_count > 0)
        count = int(to_model.sum())
        spent = time.process_time() - started
        times_spent.append(spent)
        return count

    times_spent: list[float] = []
    for r in range(LEO_HISTORY + 2):  # fill the history, untimed
        one_round(r)
    times_spent.clear()
    sent = [one_round(LEO_HISTORY + 2 + r) for r in range(args.rounds)]
    # The lags it found are the model's (rules.time_behind over the same history): the
    # floor computes the quantity the model does, not a cheaper one.
    t = 1_700_000_000_000 + (LEO_HISTORY + 1 + args.rounds) * 30_000
    order = (np.arange(LEO_HISTORY) + head + 1) % LEO_HISTORY
    for i in range(n):
        samples = np.stack([hist_t[i, order], hist_leo[i, order]], axis=1).ravel().tolist()
        for offset, found in [
            *zip(rep_leo[i, 1:].tolist(), lag_ms[i].tolist(), strict=True),
            (hw[i], hw_lag_ms[i]),
        ]:
            since = rules.time_behind(samples, int(offset), t, rising=True)
            assert found == (0 if since is None else t - since), (i, offset, found, since)
    best, median = min(times_spent), sorted(times_spent)[len(times_spent) // 2]
    print(
        f"one bucket: {n} partitions, RF {rf}, a {LEO_HISTORY}-entry LEO history; "
        f"{args.rounds} rounds"
    )
    print(
        f"the steady round's arithmetic over columns: {best / n * 1e6:.2f} us of CPU a "
        f"partition-round (best round; median {median / n * 1e6:.2f}); "
        f"rounds sent to the model: {max(sent)} of {n} at most"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
