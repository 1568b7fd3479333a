#!/usr/bin/env bash
# Run the whole suite: lint and types, then every test (pure core, properties, and the
# integration tests that start a real Kafka cluster / Prometheus / Spark on 127.0.0.1).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "==> ruff"
.venv/bin/ruff check monitor streaming tests bench dashboards
echo "==> mypy"
.venv/bin/mypy
echo "==> import contracts (pyproject.toml [tool.importlinter], docs/architecture.md)"
.venv/bin/lint-imports
# Spark drivers (the tests' session and every job they start) map the class-data sharing
# archive make setup built (streaming/cds.py): about 12 CPU-s less a driver start.
export MONITOR_SPARK_CDS_ARCHIVE="$PWD/.cache/cds/spark-driver.jsa"
echo "==> pytest: the model's doctests, on its source"
# The suite imports the compiled model (monitor/model/_native.py), whose modules pytest
# cannot collect as the .py files beside them; their examples run on the source here, and
# tests/model/test_native.py holds the two to the same findings.
MONITOR_MODEL_NATIVE=off .venv/bin/pytest --doctest-modules monitor/model -p no:cacheprovider -q
RUN=(.venv/bin/pytest --doctest-modules -p no:cacheprovider --ignore=monitor/model --timeout 900)
if [ $# -gt 0 ]; then
  # Only what it is given (the suite's folders are not added: a file given alone ran the
  # whole suite beside it before).
  echo "==> pytest $*"
  exec "${RUN[@]}" --durations=25 "$@"
fi
PYTEST=("${RUN[@]}" monitor streaming dashboards tests)
# Two lanes at once (docs/benchmarks.md, "The test suite's wall time"). The heavy lane holds
# every test that starts a JVM or the real Prometheus (the `lab`, `spark`, `prometheus`
# marks; tests/conftest.py marks the users of those fixtures) and runs at normal priority,
# on the timings the tests were written for. The light lane -- the pure and in-process
# tests, the chart and the image -- runs beside it at the lowest priority: it takes the CPU
# the heavy lane leaves while it waits on brokers, timers and scrapes.
HEAVY="lab or spark or prometheus"
mkdir -p .cache
light_log=.cache/test-light-lane.log
light_tmp=$(mktemp -d -t monitor-light-lane-XXXXXX)
echo "==> pytest, light lane: not ($HEAVY), in the background at low priority (log: $light_log)"
# The light lane puts itself in a session of its own at the lowest priority
# (tests/background.py, lowest_priority_session: this kernel schedules by session).
MONITOR_TEST_LANE=light "${PYTEST[@]}" -m "not ($HEAVY)" --basetemp "$light_tmp" \
  --durations=10 > "$light_log" 2>&1 &
light_pid=$!
# Interrupted: the light lane stops what it started (its background builds) before we exit.
trap 'kill -INT "$light_pid" 2> /dev/null && wait "$light_pid"' EXIT
echo "==> pytest, heavy lane: $HEAVY"
set +e
"${PYTEST[@]}" -m "$HEAVY" --durations=25
heavy_rc=$?
wait "$light_pid"
light_rc=$?
set -e
trap - EXIT
echo "==> pytest, light lane's output (exit $light_rc)"
cat "$light_log"
rm -rf "$light_tmp"
echo "==> pytest: heavy lane exit $heavy_rc, light lane exit $light_rc"
[ "$heavy_rc" -eq 0 ] && [ "$light_rc" -eq 0 ]
