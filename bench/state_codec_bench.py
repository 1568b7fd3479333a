"""What writing and reading a bucket's state costs, by step, and the codec beside it.

    python -m bench.state_codec_bench [--partitions 15000] [--rounds 6]

One bucket of steady partitions (``monitor.dev.synth`` round records through the operator,
as a worker holds it after a batch; at a million partitions and 64 buckets a bucket is
~15.6k partitions), then CPU per partition, best of 5, garbage collector off as in a batch:

* writing (:func:`streaming.operator.dumps`): flattening each state into a list of
  builtins, pickling the lists, compressing (zstd-1, the stored form; zlib-1, the form
  before, beside it) -- and ``marshal`` in pickle's place;
* reading (:func:`streaming.operator.loads`, what a worker pays when the bucket is not
  in its cache): decompressing, unpickling, and rebuilding the objects -- and ``marshal``
  again;
* a batch's input stored as a :class:`streaming.operator.Replay` (its payloads pickled and
  compressed, per round record): zstd-1 and zlib-1 side by side.

What the figures answered (``docs/benchmarks.md``): whether a faster codec would cut the
1M-partition job's save and load phases. The codec is a fifth of each; the rest is
making and reading Python objects per partition -- and for a Replay, the codec is most of
it (zstd-1 took the place of zlib-1 on these figures).
"""

from __future__ import annotations

import argparse
import gc
import json
import marshal
import pickle
import time
import zlib
from collections.abc import Callable
from typing import TypeVar

from monitor.dev.synth import generate
from monitor.model import ModelConfig
from streaming import operator as op
from tests.streaming.helpers import bucket_payloads, run_bucket

T = TypeVar("T")


def best(fn: Callable[[], T], per: int, times: int = 5) -> tuple[float, T]:
    """The least CPU of ``times`` calls, in µs per ``per``, and the last result."""
    least, out = float("inf"), None
    for _ in range(times):
        started = time.process_time()
        out = fn()
        least = min(least, time.process_time() - started)
    assert out is not None
    return least / per * 1e6, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.state_codec_bench", description=__doc__)
    ap.add_argument("--partitions", type=int, default=15_000)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args(argv)

    settings = op.OperatorSettings(
        buckets=1, tick_ms=3_600_000, catchup_slack_ms=10_000, model=ModelConfig(),
        cache_scope="codec-bench",
    )  # fmt: skip
    records = list(generate(args.partitions, args.rounds, form="rounds", seed=1))
    raws = [json.dumps(d).encode() for d in records]
    run_bucket(settings, {}, 0, bucket_payloads(raws, 1)[0], records[-1]["observed_at"] + 1_000)
    state = op._CACHE[("codec-bench", 0)][1]
    parts = state.model.partitions
    n = len(parts)
    gc.collect()
    gc.disable()

    t_flat, (flat, _) = best(lambda: op.flatten(parts), n)
    t_pickle, raw_p = best(lambda: op.pickle_flat(flat), n)
    t_marshal, raw_m = best(lambda: marshal.dumps(flat), n)
    t_zp, zp = best(lambda: zlib.compress(raw_p, 1), n)
    t_sp, sp = best(lambda: op._compress(raw_p), n)
    t_zm, zm = best(lambda: zlib.compress(raw_m, 1), n)
    t_dumps, blob = best(lambda: op.dumps(state), n)
    t_unzip_p, _ = best(lambda: zlib.decompress(zp), n)
    t_unzst_p, _ = best(lambda: op._decompress(sp), n)
    t_unzip_m, _ = best(lambda: zlib.decompress(zm), n)
    t_unpickle, _ = best(lambda: pickle.loads(raw_p), n)
    t_unmarshal, _ = best(lambda: marshal.loads(raw_m), n)
    t_loads, _ = best(lambda: op.loads(blob), n)

    steady = sum(v is not None for v in flat)
    print(f"one bucket: {n} partitions ({steady} steady), {args.rounds} rounds")
    print(
        f"write, us per partition: dumps {t_dumps:.2f} = flatten {t_flat:.2f} + pickle "
        f"{t_pickle:.2f} + zstd-1 {t_sp:.2f} (zlib-1 {t_zp:.2f}: ratio {t_sp / t_zp:.2f}) + "
        f"the rest; marshal instead of pickle {t_marshal:.2f} (+ zlib {t_zm:.2f})"
    )
    print(
        f"read, us per partition: loads {t_loads:.2f} = zstd-1 {t_unzst_p:.2f} (zlib-1 "
        f"{t_unzip_p:.2f}: ratio {t_unzst_p / t_unzip_p:.2f}) + unpickle {t_unpickle:.2f} + "
        f"rebuilding the objects (the rest); marshal instead of pickle {t_unmarshal:.2f} "
        f"(+ unzip {t_unzip_m:.2f})"
    )
    print(
        f"bytes per partition: stored {len(blob) / n:.0f}; flat lists pickled "
        f"{len(raw_p) / steady:.0f} (zstd-1 {len(sp) / steady:.0f}, zlib-1 "
        f"{len(zp) / steady:.0f}), marshalled {len(raw_m) / steady:.0f} (zlib "
        f"{len(zm) / steady:.0f})"
    )
    # A batch's input as a Replay stores it: one round record per partition, as the
    # collector writes them (keyed, the fields it sends), pickled and compressed.
    rounds = [d for d in generate(n, 1, form="rounds", seed=2, collector_fields=True)]
    payloads = bucket_payloads([json.dumps(d).encode() for d in rounds], 1)[0]
    replay = op.Replay(op._header(state), state.model.config, [payloads])
    m = len(payloads)
    t_pickled, raw_r = best(lambda: pickle.dumps(replay, protocol=5), m)
    t_zr, zr = best(lambda: zlib.compress(raw_r, 1), m)
    t_sr, sr = best(lambda: op._compress(raw_r), m)
    t_uzr, _ = best(lambda: zlib.decompress(zr), m)
    t_usr, _ = best(lambda: op._decompress(sr), m)
    print(
        f"a batch's input as a Replay, per record ({m}): pickle {t_pickled:.2f} us; "
        f"compress zstd-1 {t_sr:.2f} / zlib-1 {t_zr:.2f} us (ratio {t_sr / t_zr:.2f}); "
        f"decompress {t_usr:.2f} / {t_uzr:.2f} (ratio {t_usr / t_uzr:.2f}); bytes "
        f"{len(raw_r) / m:.0f} -> {len(sr) / m:.0f} / {len(zr) / m:.0f}"
    )
    gc.enable()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
