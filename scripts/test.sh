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
echo "==> pytest"
exec .venv/bin/pytest --doctest-modules monitor streaming dashboards tests -p no:cacheprovider \
  --timeout 900 --durations=25 "$@"
