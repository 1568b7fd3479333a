# The two commands of this project (see README.md):
#   make demo  - a local Kafka cluster, the collector, the Spark job, Prometheus, an incident
#   make test  - the whole test suite (unit, property, and integration on real components)
.PHONY: demo test lint bench setup wheel

setup:
	scripts/bootstrap.sh

demo: setup
	MONITOR_SPARK_CDS_ARCHIVE=$(CURDIR)/.cache/cds/spark-driver.jsa .venv/bin/monitor demo

test: setup
	scripts/test.sh

lint:
	.venv/bin/ruff check monitor streaming tests bench dashboards
	.venv/bin/ruff format --check monitor streaming tests bench dashboards
	.venv/bin/mypy
	.venv/bin/lint-imports

bench: setup
	.venv/bin/python -m bench

# The package as a wheel in dist/ (it is not on any index): `pip install 'dist/<wheel>[spark]'`
# anywhere (README.md, "Running against a real cluster").
wheel:
	python3 -m pip wheel --disable-pip-version-check --no-deps -w dist .
