{{/*
Names and labels.
*/}}
{{- define "krm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "krm.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* A component's object name: <fullname>-<component>, at most 63 characters. */}}
{{- define "krm.componentName" -}}
{{- printf "%s-%s" (include "krm.fullname" .root | trunc (int (sub 62 (len .component)))) .component | trimSuffix "-" }}
{{- end }}

{{- define "krm.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "krm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "krm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "krm.labels" -}}
helm.sh/chart: {{ include "krm.chart" . }}
{{ include "krm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kafka-replication-monitor
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels of one component (dict "root" $ "component" "collector"). */}}
{{- define "krm.componentLabels" -}}
{{ include "krm.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "krm.componentSelectorLabels" -}}
{{ include "krm.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
The label on a metrics Service that its ServiceMonitor names as jobLabel: Prometheus'
`job` of the targets is this label's value (the alerts select on it: alerts.*Selector).
*/}}
{{- define "krm.jobLabelKey" -}}kafka-replication-monitor/job{{- end }}

{{/* The image reference (dict "root" $ "image" <component image overrides>). */}}
{{- define "krm.image" -}}
{{- $img := merge (deepCopy (.image | default dict)) .root.Values.image }}
{{- $tag := $img.tag | default .root.Chart.AppVersion }}
{{- if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository $tag }}
{{- end }}
{{- end }}

{{- define "krm.imagePullPolicy" -}}
{{- $img := merge (deepCopy (.image | default dict)) .root.Values.image }}
{{- $img.pullPolicy }}
{{- end }}

{{/*
Kafka connections: the collector's `kafka` / `events_kafka`, the job's `kafka`.

Secrets are never values: each secret is an existing Secret named in values, mounted as a
file, and the settings name the file (sasl_password_file, ssl_cafile, ssl_certfile,
ssl_keyfile, ssl_key_password_file). Argument: (dict "conn" <values.kafka> "id" "kafka").
*/}}
{{- define "krm.secretsRoot" -}}/etc/kafka-replication-monitor/secrets{{- end }}

{{/* The files of a connection's secrets: a dict setting -> path (only those configured). */}}
{{- define "krm.connection.files" -}}
{{- $c := .conn }}
{{- $dir := printf "%s/%s" (include "krm.secretsRoot" .) .id }}
{{- $out := dict }}
{{- if and $c.sasl $c.sasl.passwordSecret $c.sasl.passwordSecret.name }}
{{- $_ := set $out "sasl_password_file" (printf "%s/sasl/password" $dir) }}
{{- end }}
{{- if $c.tls }}
{{- if and $c.tls.caSecret $c.tls.caSecret.name }}
{{- $_ := set $out "ssl_cafile" (printf "%s/ca/ca.crt" $dir) }}
{{- end }}
{{- if and $c.tls.clientCertSecret $c.tls.clientCertSecret.name }}
{{- $_ := set $out "ssl_certfile" (printf "%s/client/tls.crt" $dir) }}
{{- if $c.tls.clientCertSecret.keyKey }}
{{- $_ := set $out "ssl_keyfile" (printf "%s/client/tls.key" $dir) }}
{{- end }}
{{- end }}
{{- if and $c.tls.keyPasswordSecret $c.tls.keyPasswordSecret.name }}
{{- $_ := set $out "ssl_key_password_file" (printf "%s/key-password/password" $dir) }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* Pod volumes of a connection's secrets (a YAML list, possibly empty). */}}
{{- define "krm.connection.volumes" -}}
{{- $c := .conn }}
{{- if and $c.sasl $c.sasl.passwordSecret $c.sasl.passwordSecret.name }}
- name: {{ .id }}-sasl
  secret:
    secretName: {{ $c.sasl.passwordSecret.name }}
    defaultMode: 0440
    items:
      - key: {{ $c.sasl.passwordSecret.key }}
        path: password
{{- end }}
{{- if $c.tls }}
{{- if and $c.tls.caSecret $c.tls.caSecret.name }}
- name: {{ .id }}-ca
  secret:
    secretName: {{ $c.tls.caSecret.name }}
    defaultMode: 0440
    items:
      - key: {{ $c.tls.caSecret.key }}
        path: ca.crt
{{- end }}
{{- if and $c.tls.clientCertSecret $c.tls.clientCertSecret.name }}
- name: {{ .id }}-client
  secret:
    secretName: {{ $c.tls.clientCertSecret.name }}
    defaultMode: 0440
    items:
      - key: {{ $c.tls.clientCertSecret.certKey }}
        path: tls.crt
      {{- if $c.tls.clientCertSecret.keyKey }}
      - key: {{ $c.tls.clientCertSecret.keyKey }}
        path: tls.key
      {{- end }}
{{- end }}
{{- if and $c.tls.keyPasswordSecret $c.tls.keyPasswordSecret.name }}
- name: {{ .id }}-key-password
  secret:
    secretName: {{ $c.tls.keyPasswordSecret.name }}
    defaultMode: 0440
    items:
      - key: {{ $c.tls.keyPasswordSecret.key }}
        path: password
{{- end }}
{{- end }}
{{- end }}

{{/* The mounts of those volumes (read-only). */}}
{{- define "krm.connection.volumeMounts" -}}
{{- $dir := printf "%s/%s" (include "krm.secretsRoot" .) .id }}
{{- $c := .conn }}
{{- if and $c.sasl $c.sasl.passwordSecret $c.sasl.passwordSecret.name }}
- name: {{ .id }}-sasl
  mountPath: {{ $dir }}/sasl
  readOnly: true
{{- end }}
{{- if $c.tls }}
{{- if and $c.tls.caSecret $c.tls.caSecret.name }}
- name: {{ .id }}-ca
  mountPath: {{ $dir }}/ca
  readOnly: true
{{- end }}
{{- if and $c.tls.clientCertSecret $c.tls.clientCertSecret.name }}
- name: {{ .id }}-client
  mountPath: {{ $dir }}/client
  readOnly: true
{{- end }}
{{- if and $c.tls.keyPasswordSecret $c.tls.keyPasswordSecret.name }}
- name: {{ .id }}-key-password
  mountPath: {{ $dir }}/key-password
  readOnly: true
{{- end }}
{{- end }}
{{- end }}

{{/*
A connection as the settings model's keys (monitor.connection.KafkaConnection): a dict of
snake_case key -> value, the secrets as the files above.
*/}}
{{- define "krm.connection.settings" -}}
{{- $c := .conn }}
{{- $out := dict "bootstrap_servers" $c.bootstrapServers "security_protocol" $c.securityProtocol }}
{{- if and $c.sasl $c.sasl.mechanism }}
{{- $_ := set $out "sasl_mechanism" $c.sasl.mechanism }}
{{- end }}
{{- if and $c.sasl $c.sasl.username }}
{{- $_ := set $out "sasl_username" $c.sasl.username }}
{{- end }}
{{- if $c.requestTimeoutMs }}
{{- $_ := set $out "request_timeout_ms" (int64 $c.requestTimeoutMs) }}
{{- end }}
{{- if $c.bootstrapTimeoutMs }}
{{- $_ := set $out "bootstrap_timeout_ms" (int64 $c.bootstrapTimeoutMs) }}
{{- end }}
{{- $out = merge $out (include "krm.connection.files" . | fromJson) }}
{{- toJson $out }}
{{- end }}

{{/*
A scalar as text: integral numbers without a fraction or exponent (Helm reads every number
of a values file as a float: 1000000 would print as 1e+06).
*/}}
{{- define "krm.str" -}}
{{- if or (kindIs "float64" .) (kindIs "float32" .) }}
{{- if eq (float64 .) (float64 (int64 .)) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- else }}{{ toString . }}
{{- end }}
{{- end }}

{{/* A TOML value: strings as basic strings (JSON's escapes are TOML's), numbers, booleans. */}}
{{- define "krm.toml.value" -}}
{{- if kindIs "string" . }}{{ toJson . }}
{{- else if kindIs "bool" . }}{{ . }}
{{- else if or (kindIs "float64" .) (kindIs "float32" .) }}
{{- if eq (float64 .) (float64 (int64 .)) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- else if or (kindIs "int" .) (kindIs "int64" .) }}{{ . }}
{{- else }}{{ fail (printf "a TOML value cannot be %s (%v)" (kindOf .) .) }}
{{- end }}
{{- end }}

{{/*
Settings without a default, refused with one line naming the value (as the commands refuse
theirs: monitor/collector/config.py, streaming/config.py REQUIRED).
*/}}
{{- define "krm.requireKafka" -}}
{{- if not .Values.kafka.bootstrapServers }}
{{- fail "kafka.bootstrapServers is required: the watched cluster's bootstrap servers (--set kafka.bootstrapServers=HOST:PORT[,HOST:PORT])" }}
{{- end }}
{{- end }}

{{/*
The monitor's Kafka cluster: events_kafka when set; the monitored cluster only when
eventsOnWatchedCluster says so; else the chart refuses (the collector would: it publishes
nowhere without events_kafka unless events_on_watched_cluster).
*/}}
{{- define "krm.eventsConnection" -}}
{{- if .Values.eventsKafka.bootstrapServers }}
{{- toJson (dict "conn" .Values.eventsKafka "id" "events-kafka") }}
{{- else if .Values.eventsOnWatchedCluster }}
{{- include "krm.requireKafka" . }}
{{- toJson (dict "conn" .Values.kafka "id" "kafka") }}
{{- else }}
{{- fail "eventsKafka.bootstrapServers is required: the bootstrap servers of the monitor's own Kafka cluster, where the events go and the Spark job reads them (--set eventsKafka.bootstrapServers=HOST:PORT); to publish on the watched cluster itself, say so: --set eventsOnWatchedCluster=true" }}
{{- end }}
{{- end }}

{{/* The Spark job's checkpoint and store locations. */}}
{{- define "krm.stream.checkpoint" -}}
{{- if .Values.stream.checkpoint }}{{ .Values.stream.checkpoint }}
{{- else if .Values.stream.persistence.enabled }}{{ printf "%s/checkpoint" .Values.stream.persistence.mountPath }}
{{- else }}{{ fail "stream: give stream.checkpoint (an object-store URI) or enable stream.persistence" }}
{{- end }}
{{- end }}

{{- define "krm.stream.store" -}}
{{- if .Values.stream.store }}{{ .Values.stream.store }}
{{- else if .Values.stream.persistence.enabled }}{{ printf "%s/store" .Values.stream.persistence.mountPath }}
{{- else }}{{ fail "stream: give stream.store (an object-store URI) or enable stream.persistence" }}
{{- end }}
{{- end }}

{{- define "krm.stream.appName" -}}
{{- include "krm.componentName" (dict "root" . "component" "stream") }}
{{- end }}

{{- define "krm.stream.claimName" -}}
{{- .Values.stream.persistence.existingClaim | default (include "krm.componentName" (dict "root" . "component" "stream-data")) }}
{{- end }}

{{- define "krm.stream.serviceAccountName" -}}
{{- if .Values.stream.serviceAccount.create }}
{{- .Values.stream.serviceAccount.name | default (include "krm.componentName" (dict "root" . "component" "stream")) }}
{{- else }}
{{- .Values.stream.serviceAccount.name | default "default" }}
{{- end }}
{{- end }}

{{- define "krm.collector.serviceAccountName" -}}
{{- if .Values.collector.serviceAccount.create }}
{{- .Values.collector.serviceAccount.name | default (include "krm.componentName" (dict "root" . "component" "collector")) }}
{{- else }}
{{- .Values.collector.serviceAccount.name | default "default" }}
{{- end }}
{{- end }}

{{/*
The Spark job's settings as MONITOR_STREAMING_* variables (streaming/config.py): the Kafka
connection (MONITOR_STREAMING_KAFKA__*) and stream.config (a map value: KEY__SUBKEY).
*/}}
{{- define "krm.stream.env" -}}
- name: PYTHONDONTWRITEBYTECODE
  value: "1"
{{- /* spark-submit runs mainApplicationFile (site-packages/streaming/cli.py) as a script, and
Python puts a script's folder first on sys.path: there streaming/operator.py shadows the
standard library's operator (ImportError at the first import, found running the chart's
driver in the image). Python 3.11+ leaves that folder out with PYTHONSAFEPATH. */}}
- name: PYTHONSAFEPATH
  value: "1"
{{- range $k := keys .kafka | sortAlpha }}
- name: MONITOR_STREAMING_KAFKA__{{ upper $k }}
  value: {{ include "krm.str" (get $.kafka $k) | quote }}
{{- end }}
{{- range $k := keys .config | sortAlpha }}
{{- $v := get $.config $k }}
{{- if kindIs "map" $v }}
{{- range $n := keys $v | sortAlpha }}
- name: MONITOR_STREAMING_{{ upper $k }}__{{ upper $n }}
  value: {{ include "krm.str" (get $v $n) | quote }}
{{- end }}
{{- else if not (kindIs "invalid" $v) }}
- name: MONITOR_STREAMING_{{ upper $k }}
  value: {{ include "krm.str" $v | quote }}
{{- end }}
{{- end }}
{{- end }}
{{/* The driver's and executors' mounts: the state volume, /tmp, the secrets. */}}
{{- define "krm.stream.mounts" -}}
{{- if .pvc }}
- name: data
  mountPath: {{ .s.persistence.mountPath }}
{{- end }}
- name: tmp
  mountPath: /tmp
{{- if .s.sparkEntrypoint.enabled }}
- name: spark-entrypoint
  mountPath: /opt/kafka-replication-monitor/bin
  readOnly: true
{{- end }}
{{- include "krm.connection.volumeMounts" .conn }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
/metrics behind the Prometheus web configuration file (webConfig; monitor/web/config.py).

Mounted, as folders of their own (a mount inside a Secret's read-only folder could not be
made), under krm.webConfig.root:
  config/     the web configuration: the chart's Secret (web-config.yml), or
              webConfig.existingSecret whole (its relative paths resolve there)
  tls/        webConfig.tls.secretName whole (tls.crt, tls.key, ca.crt)
  client-ca/  webConfig.tls.clientCASecret (ca.crt)
Whole Secrets, never subPath: Kubernetes updates them in place and the server re-reads them.
*/}}
{{- define "krm.webConfig.root" -}}/etc/kafka-replication-monitor/web{{- end }}

{{- define "krm.webConfig.secretName" -}}
{{- .Values.webConfig.existingSecret | default (include "krm.componentName" (dict "root" . "component" "web-config")) }}
{{- end }}

{{/* The path of the web configuration file in the pods. */}}
{{- define "krm.webConfig.file" -}}
{{- $w := .Values.webConfig }}
{{- printf "%s/config/%s" (include "krm.webConfig.root" .) (ternary $w.existingSecretKey "web-config.yml" (not (empty $w.existingSecret))) }}
{{- end }}

{{/* "https" or "http": the scheme both /metrics serve. */}}
{{- define "krm.webConfig.scheme" -}}
{{- if and .Values.webConfig.enabled .Values.webConfig.tls.enabled }}https{{ else }}http{{ end }}
{{- end }}

{{/* The client CA (mutual TLS) of the rendered file: "" when clients are not verified. */}}
{{- define "krm.webConfig.clientCAFile" -}}
{{- $t := .Values.webConfig.tls }}
{{- if and $t.enabled (ne $t.clientAuthType "NoClientCert") }}
{{- if $t.clientCASecret.name }}{{ printf "%s/client-ca/ca.crt" (include "krm.webConfig.root" .) }}
{{- else }}{{ printf "%s/tls/ca.crt" (include "krm.webConfig.root" .) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The rendered web-config.yml (inline values; not with existingSecret). */}}
{{- define "krm.webConfig.content" -}}
{{- $w := .Values.webConfig }}
{{- $root := include "krm.webConfig.root" . }}
{{- $out := dict }}
{{- if $w.tls.enabled }}
{{- $tls := dict "cert_file" (printf "%s/tls/tls.crt" $root) "key_file" (printf "%s/tls/tls.key" $root) "client_auth_type" $w.tls.clientAuthType "min_version" $w.tls.minVersion }}
{{- with include "krm.webConfig.clientCAFile" . }}
{{- $_ := set $tls "client_ca_file" . }}
{{- end }}
{{- with $w.tls.clientAllowedSans }}
{{- $_ := set $tls "client_allowed_sans" . }}
{{- end }}
{{- $_ := set $out "tls_server_config" $tls }}
{{- end }}
{{- with $w.basicAuthUsers }}
{{- $_ := set $out "basic_auth_users" . }}
{{- end }}
{{- with $w.headers }}
{{- $_ := set $out "http_server_config" (dict "headers" .) }}
{{- end }}
{{- with $w.rateLimit }}
{{- $_ := set $out "rate_limit" . }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
Values that would serve nothing guarded, or guard Prometheus out: refused with one line
naming the value.
*/}}
{{- define "krm.webConfig.validate" -}}
{{- $w := .Values.webConfig }}
{{- if $w.enabled }}
{{- $monitors := or (and .Values.collector.enabled .Values.collector.serviceMonitor.enabled) (and .Values.stream.enabled .Values.stream.serviceMonitor.enabled) }}
{{- if not $w.existingSecret }}
{{- if and $w.tls.enabled (not $w.tls.secretName) }}
{{- fail "webConfig.tls.secretName is required with webConfig.tls.enabled: the existing kubernetes.io/tls Secret (tls.crt, tls.key), e.g. a cert-manager Certificate's" }}
{{- end }}
{{- if and (not $w.tls.enabled) (not $w.basicAuthUsers) }}
{{- fail "webConfig: neither TLS (webConfig.tls) nor basic-auth users (webConfig.basicAuthUsers): nothing would be guarded" }}
{{- end }}
{{- if and $w.tls.enabled $w.tls.clientAllowedSans (ne $w.tls.clientAuthType "RequireAndVerifyClientCert") }}
{{- fail "webConfig.tls.clientAllowedSans needs webConfig.tls.clientAuthType RequireAndVerifyClientCert: a client without a certificate has no SAN to match (the monitor refuses the file and does not start)" }}
{{- end }}
{{- if and $w.rateLimit (not $w.rateLimit.burst) }}
{{- fail "webConfig.rateLimit.burst is required with webConfig.rateLimit: a burst of 0 answers every request 429, Prometheus' scrapes included" }}
{{- end }}
{{- end }}
{{- if $monitors }}
{{- if and $w.tls.enabled (not $w.scrape.caSecret.name) (or $w.existingSecret (not $w.tls.secretName)) }}
{{- fail "webConfig.scrape.caSecret.name is required with webConfig.existingSecret and TLS: the Secret with the CA that signed the server's certificate, for the ServiceMonitors' tlsConfig.ca" }}
{{- end }}
{{- if and (not $w.existingSecret) $w.basicAuthUsers (not $w.scrape.basicAuthSecret.name) }}
{{- fail "webConfig.scrape.basicAuthSecret.name is required with webConfig.basicAuthUsers: the Secret with the user and password Prometheus sends (the ServiceMonitors' basicAuth); without it every scrape is answered 401" }}
{{- end }}
{{- if and (not $w.existingSecret) $w.tls.enabled (eq $w.tls.clientAuthType "RequireAndVerifyClientCert") (not $w.scrape.clientCertSecret.name) }}
{{- fail "webConfig.scrape.clientCertSecret.name is required with webConfig.tls.clientAuthType RequireAndVerifyClientCert: Prometheus' client certificate (the ServiceMonitors' tlsConfig.cert and keySecret); without it every scrape fails its handshake" }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The pod volumes of the web configuration (a YAML list; empty when off). */}}
{{- define "krm.webConfig.volumes" -}}
{{- $w := .Values.webConfig }}
{{- if $w.enabled }}
- name: web-config
  secret:
    secretName: {{ include "krm.webConfig.secretName" . }}
    defaultMode: 0440
{{- if not $w.existingSecret }}
{{- if $w.tls.enabled }}
- name: web-tls
  secret:
    secretName: {{ $w.tls.secretName }}
    defaultMode: 0440
{{- if and (ne $w.tls.clientAuthType "NoClientCert") $w.tls.clientCASecret.name }}
- name: web-client-ca
  secret:
    secretName: {{ $w.tls.clientCASecret.name }}
    defaultMode: 0440
    items:
      - key: {{ $w.tls.clientCASecret.key }}
        path: ca.crt
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Their mounts (read-only). */}}
{{- define "krm.webConfig.volumeMounts" -}}
{{- $w := .Values.webConfig }}
{{- $root := include "krm.webConfig.root" . }}
{{- if $w.enabled }}
- name: web-config
  mountPath: {{ $root }}/config
  readOnly: true
{{- if not $w.existingSecret }}
{{- if $w.tls.enabled }}
- name: web-tls
  mountPath: {{ $root }}/tls
  readOnly: true
{{- if and (ne $w.tls.clientAuthType "NoClientCert") $w.tls.clientCASecret.name }}
- name: web-client-ca
  mountPath: {{ $root }}/client-ca
  readOnly: true
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A ServiceMonitor endpoint's scheme, tlsConfig and basicAuth for the guarded /metrics
(prometheus-operator's Endpoint: tlsConfig.ca/cert/keySecret/serverName, basicAuth.username
/password, each a SecretKeySelector in the ServiceMonitor's namespace). Argument: (dict
"root" $ "service" <the metrics Service's name>).
*/}}
{{- define "krm.webConfig.endpoint" -}}
{{- $w := .root.Values.webConfig }}
{{- $s := $w.scrape }}
scheme: {{ include "krm.webConfig.scheme" .root }}
{{- if and $w.enabled $w.tls.enabled }}
tlsConfig:
  # The name in the server's certificate (Prometheus connects to the pod's IP).
  serverName: {{ $s.serverName | default (printf "%s.%s.svc" .service .root.Release.Namespace) }}
  ca:
    secret:
      name: {{ $s.caSecret.name | default $w.tls.secretName }}
      key: {{ $s.caSecret.key }}
  {{- if $s.clientCertSecret.name }}
  cert:
    secret:
      name: {{ $s.clientCertSecret.name }}
      key: {{ $s.clientCertSecret.certKey }}
  keySecret:
    name: {{ $s.clientCertSecret.name }}
    key: {{ $s.clientCertSecret.keyKey }}
  {{- end }}
{{- end }}
{{- if and $w.enabled $s.basicAuthSecret.name }}
basicAuth:
  username:
    name: {{ $s.basicAuthSecret.name }}
    key: {{ $s.basicAuthSecret.usernameKey }}
  password:
    name: {{ $s.basicAuthSecret.name }}
    key: {{ $s.basicAuthSecret.passwordKey }}
{{- end }}
{{- end }}

{{/* The NetworkPolicy rule admitting the scrapers to a metrics port (an ingress list item). */}}
{{- define "krm.networkPolicy.scrapeRule" -}}
{{- if not .root.Values.networkPolicy.scrapers }}
{{- fail "networkPolicy.scrapers is empty: a NetworkPolicy rule with an empty `from` admits everyone; name the scrapers (NetworkPolicy peers), or turn networkPolicy.enabled off" }}
{{- end }}
# The scrapers (networkPolicy.scrapers), to /metrics only.
- from:
    {{- toYaml .root.Values.networkPolicy.scrapers | nindent 4 }}
  ports:
    - port: {{ .port }}
      protocol: TCP
{{- with .root.Values.networkPolicy.extraIngress }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* NOTES.txt's curl of a port-forwarded /metrics (dict "root" $ "service" NAME "port" N). */}}
{{- define "krm.notes.curl" -}}
{{- $w := .root.Values.webConfig }}
{{- if not $w.enabled -}}
curl -s 127.0.0.1:{{ .port }}/metrics
{{- else -}}
{{- $host := $w.scrape.serverName | default (printf "%s.%s.svc" .service .root.Release.Namespace) -}}
curl -s{{ if $w.tls.enabled }} --cacert ca.crt{{ if ne $w.tls.clientAuthType "NoClientCert" }} --cert tls.crt --key tls.key{{ end }} --connect-to {{ $host }}:{{ .port }}:127.0.0.1:{{ .port }} https://{{ $host }}:{{ .port }}{{ else }} http://127.0.0.1:{{ .port }}{{ end }}/metrics{{ if or $w.basicAuthUsers $w.scrape.basicAuthSecret.name $w.existingSecret }} -u USER{{ end }}
{{- end }}
{{- end }}
