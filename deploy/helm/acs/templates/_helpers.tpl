{{/* The chart's name (nameOverride wins). */}}
{{- define "acs.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name, at most 63 characters (a DNS label): fullnameOverride, else the release
name when it already holds the chart's name, else <release>-<chart>.
*/}}
{{- define "acs.fullname" -}}
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

{{- define "acs.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "acs.labels" -}}
helm.sh/chart: {{ include "acs.chart" . }}
{{ include "acs.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "acs.selectorLabels" -}}
app.kubernetes.io/name: {{ include "acs.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "acs.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "acs.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The namespace of the sandboxes: kubernetes.namespace, else the release's. */}}
{{- define "acs.sandboxNamespace" -}}
{{- default .Release.Namespace .Values.kubernetes.namespace }}
{{- end }}

{{/* The Secret with ACS_SECRET_KEY and SESSION_API_KEY: the operator's, or the one the chart makes. */}}
{{- define "acs.keysSecretName" -}}
{{- default (printf "%s-keys" (include "acs.fullname" .)) .Values.secrets.existingSecret }}
{{- end }}

{{- define "acs.postgresql.fullname" -}}
{{- printf "%s-postgresql" (include "acs.fullname" . | trunc 52 | trimSuffix "-") }}
{{- end }}

{{- define "acs.postgresql.secretName" -}}
{{- default (include "acs.postgresql.fullname" .) .Values.postgresql.auth.existingSecret }}
{{- end }}

{{- define "acs.postgresql.selectorLabels" -}}
app.kubernetes.io/name: {{ include "acs.name" . }}-postgresql
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
A value kept from the Secret of an earlier install (so a generated key or password never
changes under stored data), else a new one. Arguments: (list $ secretName key newValue).
Returns the value base64-encoded, as a Secret's data holds it.
*/}}
{{- define "acs.keptSecretValue" -}}
{{- $root := index . 0 }}
{{- $existing := lookup "v1" "Secret" $root.Release.Namespace (index . 1) }}
{{- $kept := "" }}
{{- if $existing }}{{ $kept = index (default (dict) $existing.data) (index . 2) | default "" }}{{ end }}
{{- if $kept }}{{ $kept }}{{ else }}{{ index . 3 | b64enc }}{{ end }}
{{- end }}

{{/* Settings that cannot work together, said before anything is made. */}}
{{- define "acs.validate" -}}
{{- if and (not .Values.postgresql.enabled) (not .Values.database.existingSecret) }}
{{- fail "The service needs PostgreSQL: set postgresql.enabled=true (in-cluster, for trying it) or database.existingSecret to a Secret whose database.urlKey holds DATABASE_URL" }}
{{- end }}
{{- if and .Values.postgresql.enabled .Values.database.existingSecret }}
{{- fail "Both postgresql.enabled and database.existingSecret are set: choose one database" }}
{{- end }}
{{- if and .Values.secrets.existingSecret (or (not .Values.secrets.keys.secretKey) (not .Values.secrets.keys.sessionApiKey)) }}
{{- fail "secrets.existingSecret needs secrets.keys.secretKey and secrets.keys.sessionApiKey (the keys of ACS_SECRET_KEY and SESSION_API_KEY in it)" }}
{{- end }}
{{- if and (not .Values.secrets.existingSecret) (or .Values.secrets.keys.apiKeys .Values.secrets.keys.previousSecretKeys) }}
{{- fail "secrets.keys.apiKeys and secrets.keys.previousSecretKeys name keys of secrets.existingSecret: set it too" }}
{{- end }}
{{- end }}

{{- define "acs.postgresql.labels" -}}
helm.sh/chart: {{ include "acs.chart" . }}
{{ include "acs.postgresql.selectorLabels" . }}
app.kubernetes.io/component: database
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The service's environment: the Deployment's, and the sandbox clean-up hook's (the same installation). */}}
{{- define "acs.env" -}}
- { name: PORT, value: "3000" }
- { name: HOST, value: "0.0.0.0" }
- { name: DATA_DIR, value: /data }
- { name: LOG_LEVEL, value: {{ .Values.config.logLevel | quote }} }
- { name: ACS_TRUST_PROXY, value: {{ .Values.config.trustProxy | quote }} }
- { name: ACS_SHUTDOWN_TIMEOUT_SECONDS, value: {{ .Values.config.shutdownTimeoutSeconds | quote }} }
{{- with .Values.config.sandboxUrlHost }}
- { name: ACS_SANDBOX_URL_HOST, value: {{ . | quote }} }
{{- end }}
- name: ACS_SECRET_KEY
  valueFrom: { secretKeyRef: { name: {{ include "acs.keysSecretName" . }}, key: {{ .Values.secrets.keys.secretKey }} } }
- name: SESSION_API_KEY
  valueFrom: { secretKeyRef: { name: {{ include "acs.keysSecretName" . }}, key: {{ .Values.secrets.keys.sessionApiKey }} } }
{{- with .Values.secrets.keys.apiKeys }}
- name: ACS_API_KEYS
  valueFrom: { secretKeyRef: { name: {{ $.Values.secrets.existingSecret }}, key: {{ . }} } }
{{- end }}
{{- with .Values.secrets.keys.previousSecretKeys }}
- name: ACS_PREVIOUS_SECRET_KEYS
  valueFrom: { secretKeyRef: { name: {{ $.Values.secrets.existingSecret }}, key: {{ . }} } }
{{- end }}
{{- if .Values.postgresql.enabled }}
- name: POSTGRESQL_PASSWORD
  valueFrom: { secretKeyRef: { name: {{ include "acs.postgresql.secretName" . }}, key: {{ .Values.postgresql.auth.passwordKey }} } }
# Kubernetes puts the password in ($(VAR) of a variable defined above); the generated
# one is letters and digits, a password of yours must be URL-safe.
- name: DATABASE_URL
  value: "postgres://{{ .Values.postgresql.auth.username }}:$(POSTGRESQL_PASSWORD)@{{ include "acs.postgresql.fullname" . }}.{{ .Release.Namespace }}.svc:5432/{{ .Values.postgresql.auth.database }}"
{{- else }}
- name: DATABASE_URL
  valueFrom: { secretKeyRef: { name: {{ .Values.database.existingSecret }}, key: {{ .Values.database.urlKey }} } }
{{- end }}
- { name: ACS_SANDBOXES, value: kubernetes }
- { name: ACS_KUBERNETES_NAMESPACE, value: {{ include "acs.sandboxNamespace" . | quote }} }
{{- with .Values.kubernetes.storageClass }}
- { name: ACS_KUBERNETES_STORAGE_CLASS, value: {{ . | quote }} }
{{- end }}
- { name: ACS_KUBERNETES_IMAGE_PULL_POLICY, value: {{ .Values.kubernetes.imagePullPolicy | quote }} }
{{- with .Values.kubernetes.runtimeClass }}
- { name: ACS_KUBERNETES_RUNTIME_CLASS, value: {{ . | quote }} }
{{- end }}
- { name: ACS_KUBERNETES_WORKSPACE_SIZE, value: {{ .Values.kubernetes.workspaceSize | quote }} }
- { name: ACS_KUBERNETES_NETWORK_POLICY, value: {{ .Values.kubernetes.networkPolicy | quote }} }
{{- with .Values.kubernetes.sandboxEgressExcept }}
- { name: ACS_KUBERNETES_SANDBOX_EGRESS_EXCEPT, value: {{ join "," . | quote }} }
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
