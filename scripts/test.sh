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
echo "==> pytest"
exec .venv/bin/pytest --doctest-modules monitor streaming dashboards tests -p no:cacheprovider \
  --ignore=monitor/model --timeout 900 --durations=25 "$@"
