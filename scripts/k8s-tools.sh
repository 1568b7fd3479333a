#!/usr/bin/env bash
# The Kubernetes chart's tools and its copies of the package's files.
#
#   scripts/k8s-tools.sh install   the pinned tools into .cache/tools (idempotent; when they
#                                  are there it only checks stamps and exits, in milliseconds):
#       bin/helm                   Helm, built from its Go module (the Go module proxy)
#       venv/                      kubernetes-validate, check-jsonschema (PyPI)
#       schemas/*.json             JSON Schemas of the custom resources the chart renders,
#                                  the openAPIV3Schema of the CRDs their projects publish in
#                                  their Go modules (prometheus-operator, spark-operator)
#   scripts/k8s-tools.sh sync      copy the rule files and dashboards into the chart
#                                  (deploy/helm/kafka-replication-monitor/files/): Helm reads
#                                  no file outside a chart. tests/deploy/test_chart.py fails
#                                  when the copies differ from the package's files.
#   scripts/k8s-tools.sh versions  the pins, one `name version` a line
#
# Environment: GO (default: go on PATH, else /usr/local/go/bin/go), PYTHON (python3),
# K8S_TOOLS_DIR (default .cache/tools). Set K8S_TOOLS_KEEP_GO=1 to keep the Go module and
# build caches (.cache/tools/go) after building; by default they are removed (~1 GB).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# -- pins -------------------------------------------------------------------------------------
HELM_VERSION=v3.22.0                       # helm.sh/helm/v3
PROMETHEUS_OPERATOR_VERSION=v0.85.0        # github.com/prometheus-operator/prometheus-operator
SPARK_OPERATOR_VERSION=v2.3.0              # github.com/kubeflow/spark-operator/v2
KUBERNETES_VALIDATE_VERSION=1.37.0         # PyPI kubernetes-validate
CHECK_JSONSCHEMA_VERSION=0.39.0            # PyPI check-jsonschema

# Their dependencies, pinned too (pip install -c): the set pip resolved for the two above.
PY_CONSTRAINTS="attrs==26.1.0
certifi==2026.10.19.post1
charset-normalizer==3.5.2
click==8.5.1
idna==3.20
importlib_resources==7.1.0
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
packaging==26.3
PyYAML==6.0.4
referencing==0.37.0
regress==2026.9.1
requests==2.34.2
rpds-py==2026.9.1
ruamel.yaml==0.19.1
typing_extensions==4.16.0
urllib3==2.8.0"

CHART=deploy/helm/kafka-replication-monitor
TOOLS=${K8S_TOOLS_DIR:-$ROOT/.cache/tools}
STAMPS=$TOOLS/stamps

step() { printf '==> %s\n' "$*" >&2; }
die() { printf 'k8s-tools: %s\n' "$*" >&2; exit 1; }

go_bin() {
  if [ -n "${GO:-}" ]; then echo "$GO"; return; fi
  command -v go 2>/dev/null || { [ -x /usr/local/go/bin/go ] && echo /usr/local/go/bin/go; } \
    || die "no Go toolchain (set GO=/path/to/go)"
}

# A private Go environment: module and build caches under the tools folder, no toolchain
# download, read-write module cache (so that it can be removed).
go_env() {
  export GOMODCACHE=$TOOLS/go/mod GOCACHE=$TOOLS/go/build GOPATH=$TOOLS/go/path
  export GOTOOLCHAIN=local GOFLAGS="-modcacherw -trimpath -buildvcs=false"
  export CGO_ENABLED=0
}

install_helm() {
  local stamp=$STAMPS/helm-$HELM_VERSION
  if [ -f "$stamp" ] && [ -x "$TOOLS/bin/helm" ]; then return; fi
  step "building helm $HELM_VERSION from its Go module (a first build takes minutes)"
  local go; go=$(go_bin)
  (
    go_env
    # The Kubernetes version Helm assumes without a cluster (helm template, helm lint) is
    # set at link time, as Helm's Makefile does: client-go v0.N.x is Kubernetes 1.N.
    gomod=$(cd / && "$go" mod download -json "helm.sh/helm/v3@$HELM_VERSION" \
      | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    k8s_minor=$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod")
    [ -n "$k8s_minor" ] || die "no k8s.io/client-go in $gomod"
    x=""
    for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
      x="$x -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
    done
    # -s -w: no symbol table or DWARF (a smaller binary, a shorter link).
    GOBIN=$TOOLS/bin "$go" install \
      -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION$x" \
      "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  )
  "$TOOLS/bin/helm" version --short >&2
  rm -f "$STAMPS"/helm-*
  touch "$stamp"
}

install_python_tools() {
  local pins
  pins=$(printf '%s\n' "$KUBERNETES_VALIDATE_VERSION $CHECK_JSONSCHEMA_VERSION" "$PY_CONSTRAINTS" \
    | sha1sum | cut -c1-12)
  local stamp=$STAMPS/py-kubernetes-validate-$KUBERNETES_VALIDATE_VERSION-check-jsonschema-$CHECK_JSONSCHEMA_VERSION-$pins
  if [ -f "$stamp" ] && [ -x "$TOOLS/venv/bin/check-jsonschema" ]; then return; fi
  step "installing kubernetes-validate $KUBERNETES_VALIDATE_VERSION, check-jsonschema $CHECK_JSONSCHEMA_VERSION"
  [ -x "$TOOLS/venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$TOOLS/venv"
  printf '%s\n' "$PY_CONSTRAINTS" >"$TOOLS/venv/constraints.txt"
  "$TOOLS/venv/bin/pip" install --disable-pip-version-check --progress-bar off -q \
    -c "$TOOLS/venv/constraints.txt" \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" \
    "check-jsonschema==$CHECK_JSONSCHEMA_VERSION"
  rm -f "$STAMPS"/py-*
  touch "$stamp"
}

# The openAPIV3Schema of a CRD's served version as a JSON Schema: apiVersion and kind pinned,
# and -- as the API server's strict field validation (kubectl's default) -- no field the
# schema does not name, except where it says x-kubernetes-preserve-unknown-fields.
crd_to_schema() {  # crd.yaml version out.json
  "$TOOLS/venv/bin/python" - "$@" <<'EOF'
import json, re, sys, yaml
crd_path, version, out = sys.argv[1:]
crd = yaml.safe_load(open(crd_path))
spec = crd["spec"]
ver = next(v for v in spec["versions"] if v["name"] == version)
schema = ver["schema"]["openAPIV3Schema"]

def python_pattern(pattern):
    # Go's RE2 takes inline flags anywhere ("^(?i)(abort|warn)?$"); Python only at the start.
    m = re.match(r"^\^(\(\?[a-z]+\))(.*)$", pattern)
    if m:
        pattern = m[1] + "^" + m[2]
    re.compile(pattern)
    return pattern

def strict(node):
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            node["pattern"] = python_pattern(node["pattern"])
        if (node.get("type") == "object" and "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        for value in node.values():
            strict(value)
    elif isinstance(node, list):
        for value in node:
            strict(value)

strict(schema)
schema["properties"]["apiVersion"] = {"type": "string", "enum": [f"{spec['group']}/{version}"]}
schema["properties"]["kind"] = {"type": "string", "enum": [spec["names"]["kind"]]}
schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
schema["$schema"] = "http://json-schema.org/draft-07/schema#"
schema["title"] = f"{spec['names']['kind']} {spec['group']}/{version} ({crd_path.split('/mod/')[-1]})"
with open(out, "w") as f:
    json.dump(schema, f, indent=1, sort_keys=True)
EOF
}

install_schemas() {
  # The conversion is this script's: its hash is part of the stamp.
  local stamp
  stamp=$STAMPS/schemas-prometheus-operator-$PROMETHEUS_OPERATOR_VERSION-spark-operator-$SPARK_OPERATOR_VERSION-$(sha1sum "$ROOT/scripts/k8s-tools.sh" | cut -c1-12)
  if [ -f "$stamp" ] && [ -d "$TOOLS/schemas" ]; then return; fi
  step "CRD schemas: prometheus-operator $PROMETHEUS_OPERATOR_VERSION, spark-operator $SPARK_OPERATOR_VERSION (Go modules)"
  local go; go=$(go_bin)
  local po so
  po=$(go_env; cd /; "$go" mod download -json \
    "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" \
    | "$TOOLS/venv/bin/python" -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error")))')
  so=$(go_env; cd /; "$go" mod download -json \
    "github.com/kubeflow/spark-operator/v2@$SPARK_OPERATOR_VERSION" \
    | "$TOOLS/venv/bin/python" -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error")))')
  rm -rf "$TOOLS/schemas.new"; mkdir -p "$TOOLS/schemas.new"
  local crds=$po/example/prometheus-operator-crd
  crd_to_schema "$crds/monitoring.coreos.com_servicemonitors.yaml" v1 "$TOOLS/schemas.new/servicemonitor-monitoring.coreos.com-v1.json"
  crd_to_schema "$crds/monitoring.coreos.com_prometheusrules.yaml" v1 "$TOOLS/schemas.new/prometheusrule-monitoring.coreos.com-v1.json"
  crd_to_schema "$so/config/crd/bases/sparkoperator.k8s.io_sparkapplications.yaml" v1beta2 "$TOOLS/schemas.new/sparkapplication-sparkoperator.k8s.io-v1beta2.json"
  rm -rf "$TOOLS/schemas"; mv "$TOOLS/schemas.new" "$TOOLS/schemas"
  rm -f "$STAMPS"/schemas-*
  touch "$stamp"
}

cmd_install() {
  mkdir -p "$STAMPS" "$TOOLS/bin"
  # One installer at a time (two test sessions starting together).
  exec 9>"$TOOLS/.lock"
  flock 9
  local t0=$SECONDS
  local t
  for part in install_python_tools install_schemas install_helm; do
    t=$SECONDS
    "$part"
    [ $((SECONDS - t)) -lt 1 ] || step "$part: $((SECONDS - t)) s"
  done
  if [ "${K8S_TOOLS_KEEP_GO:-0}" != 1 ] && [ -d "$TOOLS/go" ]; then
    step "removing the Go caches ($TOOLS/go)"
    rm -rf "$TOOLS/go"
  fi
  [ $((SECONDS - t0)) -lt 1 ] || step "tools ready in $((SECONDS - t0)) s"
}

cmd_sync() {
  local files=$CHART/files
  rm -rf "$files/rules" "$files/dashboards"
  mkdir -p "$files/rules" "$files/dashboards"
  cp monitor/assets/prometheus/rules/*.yml "$files/rules/"
  cp dashboards/json/*.json "$files/dashboards/"
  step "synced $(ls "$files/rules" | wc -l) rule files, $(ls "$files/dashboards" | wc -l) dashboards into $files"
}

cmd_versions() {
  printf '%s %s\n' helm "$HELM_VERSION" prometheus-operator "$PROMETHEUS_OPERATOR_VERSION" \
    spark-operator "$SPARK_OPERATOR_VERSION" kubernetes-validate "$KUBERNETES_VALIDATE_VERSION" \
    check-jsonschema "$CHECK_JSONSCHEMA_VERSION"
}

case "${1:-}" in
  install) cmd_install ;;
  sync) cmd_sync ;;
  versions) cmd_versions ;;
  *) echo "usage: $0 install|sync|versions" >&2; exit 2 ;;
esac
