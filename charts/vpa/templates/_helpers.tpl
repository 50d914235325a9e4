{{/*
Names, labels, and the one place that decides which Deployments exist and what each one runs
("vpa.deployments"); every other template reads that list, so combined and split mode cannot disagree.
*/}}

{{- define "vpa.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "vpa.fullname" -}}
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

{{- define "vpa.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "vpa.labels" -}}
helm.sh/chart: {{ include "vpa.chart" . }}
app.kubernetes.io/name: {{ include "vpa.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of every vpa pod of the release (the metrics Service selects these). */}}
{{- define "vpa.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vpa.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The image reference. */}}
{{- define "vpa.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Name of the webhook Service (also `--webhook-service`). */}}
{{- define "vpa.webhookServiceName" -}}
{{- default (printf "%s-webhook" (include "vpa.fullname" .)) .Values.admissionController.service.name }}
{{- end }}

{{/* Namespace of the leader-election Leases. */}}
{{- define "vpa.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{/* Secret name of the cert-manager Certificate. */}}
{{- define "vpa.certManagerSecretName" -}}
{{- printf "%s-webhook-tls" (include "vpa.fullname" .) }}
{{- end }}

{{/*
Values key of each component: component name → key under .Values.
*/}}
{{- define "vpa.componentKey" -}}
{{- if eq . "admission-controller" }}admissionController{{ else }}{{ . }}{{ end }}
{{- end }}

{{/*
The Deployments to render, as a JSON list. Each item: name (object name), component (the
app.kubernetes.io/component label), components (what `--components` names), replicas, serviceAccount,
podKey (values key whose `pod` overrides the top-level `pod`, or "").
*/}}
{{- define "vpa.deployments" -}}
{{- $fullname := include "vpa.fullname" . }}
{{- $sa := default $fullname .Values.serviceAccount.name }}
{{- $enabled := list }}
{{- range $c := list "recommender" "updater" "admission-controller" }}
{{- if (index $.Values (include "vpa.componentKey" $c)).enabled }}
{{- $enabled = append $enabled $c }}
{{- end }}
{{- end }}
{{- if not $enabled }}
{{- fail "enable at least one of recommender, updater, admissionController" }}
{{- end }}
{{- $out := list }}
{{- if eq .Values.mode "combined" }}
{{- $out = append $out (dict "name" $fullname "component" "combined" "components" $enabled "replicas" (int .Values.replicas) "serviceAccount" $sa "podKey" "") }}
{{- else if eq .Values.mode "split" }}
{{- range $c := $enabled }}
{{- $key := include "vpa.componentKey" $c }}
{{- $out = append $out (dict "name" (printf "%s-%s" $fullname $c) "component" $c "components" (list $c) "replicas" (int (index $.Values $key).replicas) "serviceAccount" (printf "%s-%s" $sa $c) "podKey" $key) }}
{{- end }}
{{- else }}
{{- fail (printf "mode must be combined or split, not %q" .Values.mode) }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* The Deployment item (JSON) that runs component `.component`, or "" when none does. */}}
{{- define "vpa.deploymentOf" -}}
{{- $want := .component }}
{{- range $d := include "vpa.deployments" .root | fromJsonArray }}
{{- if has $want $d.components }}{{ toJson $d }}{{ end }}
{{- end }}
{{- end }}

{{/* Whether leader election is on for a Deployment item `.deployment`: "true" or "". */}}
{{- define "vpa.leaderElect" -}}
{{- $d := .deployment }}
{{- if or (has "recommender" $d.components) (has "updater" $d.components) }}
{{- $setting := .root.Values.leaderElection.enabled }}
{{- if kindIs "invalid" $setting }}
{{- if gt (int $d.replicas) 1 }}true{{ end }}
{{- else if $setting }}true{{ end }}
{{- end }}
{{- end }}

{{/*
One flag value as the binary reads it: whole floats without an exponent (YAML numbers reach templates
as float64, and "%v" of 104857600.0 is 1.048576e+08), lists joined with commas, maps as key:value pairs.
*/}}
{{- define "vpa.flagValue" -}}
{{- $v := . }}
{{- if kindIs "slice" $v }}
{{- $parts := list }}
{{- range $v }}{{ $parts = append $parts (include "vpa.flagValue" .) }}{{ end }}
{{- join "," $parts }}
{{- else if kindIs "map" $v }}
{{- $parts := list }}
{{- range $k, $x := $v }}{{ $parts = append $parts (printf "%s:%s" $k (include "vpa.flagValue" $x)) }}{{ end }}
{{- join "," $parts }}
{{- else if and (kindIs "float64" $v) (eq (float64 (int64 $v)) $v) }}
{{- int64 $v }}
{{- else }}
{{- $v }}
{{- end }}
{{- end }}

{{/* `--name=value` lines for a flags map (sorted by name; null values skipped). */}}
{{- define "vpa.flagArgs" -}}
{{- range $name, $value := . }}
{{- if not (kindIs "invalid" $value) }}
- {{ printf "--%s=%s" $name (include "vpa.flagValue" $value) | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The container args of a Deployment item `.deployment`: `run`, the components, the chart-managed flags,
then the user's flags (common, per component, feature gates) and extra args.
*/}}
{{- define "vpa.args" -}}
{{- $root := .root }}
{{- $d := .deployment }}
{{- $v := $root.Values -}}
- run
- {{ printf "--components=%s" (join "," $d.components) | quote }}
- {{ printf "--address=:%d" (int $v.metrics.port) | quote }}
{{- if include "vpa.leaderElect" . }}
- "--leader-elect=true"
- {{ printf "--leader-elect-lease-duration=%s" $v.leaderElection.leaseDuration | quote }}
- {{ printf "--leader-elect-renew-deadline=%s" $v.leaderElection.renewDeadline | quote }}
- {{ printf "--leader-elect-retry-period=%s" $v.leaderElection.retryPeriod | quote }}
- {{ printf "--leader-elect-resource-namespace=%s" (include "vpa.leaseNamespace" $root) | quote }}
{{- if has "recommender" $d.components }}
- {{ printf "--recommender-leader-elect-resource-name=%s" $v.leaderElection.recommenderLeaseName | quote }}
{{- end }}
{{- if has "updater" $d.components }}
- {{ printf "--updater-leader-elect-resource-name=%s" $v.leaderElection.updaterLeaseName | quote }}
{{- end }}
{{- end }}
{{- if has "admission-controller" $d.components }}
- {{ printf "--port=%d" (int $v.admissionController.port) | quote }}
- {{ printf "--webhook-service=%s" (include "vpa.webhookServiceName" $root) | quote }}
{{- if ne $v.admissionController.certificates.mode "self-managed" }}
- "--client-ca-file=/etc/tls-certs/caCert.pem"
- "--tls-cert-file=/etc/tls-certs/serverCert.pem"
- "--tls-private-key=/etc/tls-certs/serverKey.pem"
- "--reload-cert=true"
{{- end }}
{{- end }}
{{- if and (has "updater" $d.components) (not $v.admissionController.enabled) (not (hasKey $v.updater.flags "use-admission-controller-status")) }}
{{- /* Without an admission controller its status Lease never renews and the updater would wait forever. */}}
- "--use-admission-controller-status=false"
{{- end }}
{{- include "vpa.flagArgs" $v.flags }}
{{- range $c := $d.components }}
{{- include "vpa.flagArgs" (index $v (include "vpa.componentKey" $c)).flags }}
{{- end }}
{{- with $v.featureGates }}
{{- $pairs := list }}
{{- range $gate, $on := . }}{{ $pairs = append $pairs (printf "%s=%t" $gate $on) }}{{ end }}
- {{ printf "--feature-gates=%s" (join "," $pairs) | quote }}
{{- end }}
{{- range $v.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- range $c := $d.components }}
{{- range (index $v (include "vpa.componentKey" $c)).extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* Checks of combinations the binary would refuse at startup, so `helm install` refuses them first. */}}
{{- define "vpa.validate" -}}
{{- $v := .Values }}
{{- $certModes := list "self-managed" "cert-manager" "secret" }}
{{- if not (has $v.admissionController.certificates.mode $certModes) }}
{{- fail (printf "admissionController.certificates.mode must be one of %s" (join ", " $certModes)) }}
{{- end }}
{{- if and (eq $v.admissionController.certificates.mode "self-managed") (hasKey $v.admissionController.flags "register-webhook") (not (index $v.admissionController.flags "register-webhook")) }}
{{- fail "self-managed certificates need register-webhook: the admission controller must own the webhook's caBundle (use certificates.mode cert-manager or secret)" }}
{{- end }}
{{- if and (eq $v.mode "combined") $v.recommender.enabled $v.updater.enabled (eq $v.leaderElection.recommenderLeaseName $v.leaderElection.updaterLeaseName) }}
{{- fail "leaderElection.recommenderLeaseName and updaterLeaseName must differ: both run in one process" }}
{{- end }}
{{- end }}
