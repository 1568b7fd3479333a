#!/usr/bin/env bash
# Set up everything the demo and the tests need, idempotently, on a fresh machine:
#   1. a virtualenv in .venv with the pinned dependencies (requirements.lock) and this package,
#      and the watermark model compiled with mypyc into .cache/native-model;
#   2. the Maven jars (Kafka broker, JMX exporter agent, Spark's Kafka source) into .cache/;
#   3. Prometheus, promtool and Alertmanager from Debian's packages, when missing, and buildah
#      and debootstrap (the container image's builder and the base it builds on, deploy/image)
#      -- with a policy-rc.d in place so that no service of the host is started, stopped or
#      restarted.
# Usage: scripts/bootstrap.sh [--no-jars] [--no-apt]
set -euo pipefail
cd "$(dirname "$0")/.."

want_jars=1
want_apt=1
for arg in "$@"; do
  case "$arg" in
    --no-jars) want_jars=0 ;;
    --no-apt) want_apt=0 ;;
    *) echo "bootstrap: unknown option $arg" >&2; exit 2 ;;
  esac
done

step() { printf '\n==> %s\n' "$*"; }

PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || { echo "bootstrap: $PY not found (Python 3.11+ is required)" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  step "creating virtualenv .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(sha1sum requirements.lock pyproject.toml | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  step "installing pinned dependencies (requirements.lock) and the package"
  # pip itself first, from its hashed entry in the lock (never an unpinned upgrade from the
  # index): the lock's other files are then installed by the pinned pip.
  awk '/^pip==/ { keep = 1; print; next } keep && /^[ \t]/ { print; next } { keep = 0 }' \
    requirements.lock > .venv/pip.lock
  if ! grep -q -- '--hash=sha256:' .venv/pip.lock; then
    echo "bootstrap: requirements.lock has no hashed pip==VERSION entry (scripts/lock.py)" >&2
    exit 1
  fi
  .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off -q \
    --require-hashes --no-deps -r .venv/pip.lock
  # --require-hashes: every file must match the lock's hashes (scripts/lock.py writes them).
  # --no-compile: modules are compiled on first import, not all at install (all ~6,400 of
  # them: 38 CPU-s on a 2-core test machine, docs/benchmarks.md; most never imported).
  .venv/bin/pip install --disable-pip-version-check --progress-bar off --require-hashes \
    --no-compile -r requirements.lock
  .venv/bin/pip install --disable-pip-version-check -q --no-deps -e .
  # An install only ever adds: a package the lock no longer names stays, and may shadow
  # others (urllib3-future's .pth replaced urllib3 after grafana-client left the lock).
  # Remove them, then reinstall the lock's files over whatever their removal took along.
  leftover=$(.venv/bin/python scripts/lock.py --leftovers)
  if [ -n "$leftover" ]; then
    step "removing what the lock no longer names: $leftover"
    # shellcheck disable=SC2086
    .venv/bin/pip uninstall --disable-pip-version-check -q -y $leftover
    .venv/bin/pip install --disable-pip-version-check --progress-bar off --require-hashes \
      --no-compile --no-deps --force-reinstall -q -r requirements.lock
  fi
  rm -f .venv/.installed-*
  touch "$stamp"
else
  echo "==> virtualenv up to date"
fi

# The watermark model compiled with mypyc (monitor/model/_native.py): ~2x faster in the
# Spark job's Python workers. Rebuilt only when the model's sources changed; without a C
# compiler the model runs from source, as it does wherever no current build is found.
if ! .venv/bin/python scripts/compile_model.py; then
  echo "bootstrap: the model could not be compiled; it runs from source (slower)" >&2
fi

if [ "$want_jars" = 1 ] && .venv/bin/python -c "import monitor.jars" 2>/dev/null; then
  step "resolving Maven jars"
  .venv/bin/monitor lab jars
fi

# The Spark driver's class-data sharing archive (streaming/cds.py): every driver started with
# MONITOR_SPARK_CDS_ARCHIVE naming it (make test, make demo) loads Spark's classes parsed and
# verified, for ~40 % less CPU a start (bench/spark_start_bench.py). Rebuilt only when
# pyspark or the JDK changes; without it, drivers start as before.
step "the Spark driver's class-data sharing archive"
if ! .venv/bin/python -m streaming.cds build .cache/cds/spark-driver.jsa; then
  echo "(no class-data sharing archive: Spark drivers start without it)" >&2
fi

if [ "$want_apt" = 1 ]; then
  missing=()
  command -v prometheus >/dev/null || missing+=(prometheus)
  command -v promtool >/dev/null || missing+=(prometheus)
  command -v prometheus-alertmanager >/dev/null || command -v alertmanager >/dev/null \
    || missing+=(prometheus-alertmanager)
  command -v buildah >/dev/null || missing+=(buildah)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  if [ ${#missing[@]} -gt 0 ]; then
    step "installing from Debian: ${missing[*]}"
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    # The packages would start (and enable) their system services; this project runs its own
    # instances on its own ports, and setup must never start, stop or restart a service of
    # the host. Debian's policy-rc.d (exit 101: "action forbidden") keeps the maintainer
    # scripts from starting anything -- invoke-rc.d and deb-systemd-invoke both ask it.
    # One already there is the host's policy and is left exactly as it is.
    policy=${POLICY_RC_D:-/usr/sbin/policy-rc.d}
    placed=0
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\n# written by scripts/bootstrap.sh while it installs packages\nexit 101\n' \
        | $sudo tee "$policy" >/dev/null
      $sudo chmod 755 "$policy"
      placed=1
      trap 'if [ "$placed" = 1 ]; then $sudo rm -f "$policy"; fi' EXIT
    fi
    $sudo apt-get update -q
    # --no-install-recommends: the recommended node exporter etc. are not needed.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
      $(printf '%s\n' "${missing[@]}" | sort -u)
    if [ "$placed" = 1 ]; then
      $sudo rm -f "$policy"
      placed=0
    fi
  else
    echo "==> prometheus, promtool, alertmanager present"
  fi
fi
