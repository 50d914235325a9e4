{{/*
RBAC building blocks shared by the per-component rbac-*.yaml templates.
*/}}

{{/* Reading VPA targets: the well-known controllers, the scale subresource of any kind, and rbac.extraTargetRules. */}}
{{- define "vpa.rbac.targetRules" -}}
- apiGroups: [""]
  resources: [replicationcontrollers]
  verbs: [get, list, watch]
- apiGroups: [apps]
  resources: [deployments, replicasets, statefulsets, daemonsets]
  verbs: [get, list, watch]
- apiGroups: [batch]
  resources: [jobs, cronjobs]
  verbs: [get, list, watch]
- apiGroups: ["*"]
  resources: ["*/scale"]
  verbs: [get]
{{- with .Values.rbac.extraTargetRules }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Writing Events about pods and VPAs in any namespace (new ones, and count bumps of repeated ones). */}}
{{- define "vpa.rbac.eventRules" -}}
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end }}

{{/* Metadata of an RBAC object: `.root`, `.name`, `.namespace` (optional), `.component`. */}}
{{- define "vpa.rbac.metadata" -}}
metadata:
  name: {{ .name }}
  {{- with .namespace }}
  namespace: {{ . }}
  {{- end }}
  labels:
    {{- include "vpa.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* A binding's subjects: the ServiceAccount of the Deployment `.deployment`. */}}
{{- define "vpa.rbac.subjects" -}}
subjects:
  - kind: ServiceAccount
    name: {{ .deployment.serviceAccount }}
    namespace: {{ .root.Release.Namespace }}
{{- end }}

{{/*
A Role for leader election in the lease namespace, plus its binding: `.root`, `.deployment`, `.component`,
`.lease` (the Lease name). Create cannot be limited by name; get and update can.
*/}}
{{- define "vpa.rbac.leaderElection" -}}
{{- $name := printf "%s-%s-leader-election" (include "vpa.fullname" .root) .component }}
{{- $ns := include "vpa.leaseNamespace" .root }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
{{ include "vpa.rbac.metadata" (dict "root" .root "name" $name "namespace" $ns "component" .component) }}
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [{{ .lease | quote }}]
    verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
{{ include "vpa.rbac.metadata" (dict "root" .root "name" $name "namespace" $ns "component" .component) }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
{{ include "vpa.rbac.subjects" . }}
{{- end }}

{{/* A ClusterRoleBinding of ClusterRole `.name` to the Deployment's ServiceAccount. */}}
{{- define "vpa.rbac.clusterBinding" -}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
{{ include "vpa.rbac.metadata" (dict "root" .root "name" .name "component" .component) }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ .name }}
{{ include "vpa.rbac.subjects" . }}
{{- end }}
