{{/*
The namespace of the manager, the agents, their service accounts and the
sysctl ConfigMap: namespace.name, else the release's (helm install -n).
*/}}
{{- define "latencytier.namespace" -}}
{{ .Values.namespace.name | default .Release.Namespace }}
{{- end }}

{{/* The manager's image reference. */}}
{{- define "latencytier.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The agent's image reference: agent.image, else the manager's. */}}
{{- define "latencytier.agentImage" -}}
{{ .Values.agent.image | default (include "latencytier.image" .) }}
{{- end }}

{{/*
Helm's standard labels, on the metadata of every object the chart renders
(never in a selector, which is immutable, nor in a pod template, so that a
chart-only bump does not restart every agent). app.kubernetes.io/name is
also in config/default; the other four are Helm's own, and
charts_test.go ignores exactly those when it compares the two.
*/}}
{{- define "latencytier.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: latencytier
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels of the manager's Deployment and pods. */}}
{{- define "latencytier.managerLabels" -}}
app.kubernetes.io/name: latencytier
app.kubernetes.io/component: manager
{{- end }}

{{/* Labels of an agent DaemonSet and its pods; the argument is the variant. */}}
{{- define "latencytier.agentLabels" -}}
app.kubernetes.io/name: latencytier
app.kubernetes.io/component: agent
latencytier.io/agent-variant: {{ . }}
{{- end }}

{{/*
An agent DaemonSet's affinity; the argument is a dict of the variant and
agent.affinity. The manager's agent label, with exactly this variant as its
value, is required in every one of the user's required node selector terms
(terms are ORed, a term's expressions ANDed), or alone when there are none:
the user's affinity narrows where an agent runs, never widens it. Everything
else of agent.affinity passes through.
*/}}
{{- define "latencytier.agentAffinity" -}}
{{- $own := dict "key" "node-restriction.kubernetes.io/latencytier-agent" "operator" "In" "values" (list .variant) }}
{{- $aff := deepCopy (.affinity | default dict) }}
{{- $node := $aff.nodeAffinity | default dict }}
{{- $req := $node.requiredDuringSchedulingIgnoredDuringExecution | default dict }}
{{- $terms := list }}
{{- range $req.nodeSelectorTerms | default (list dict) }}
{{- $terms = append $terms (set . "matchExpressions" (append (.matchExpressions | default list) $own)) }}
{{- end }}
{{- $_ := set $req "nodeSelectorTerms" $terms }}
{{- $_ = set $node "requiredDuringSchedulingIgnoredDuringExecution" $req }}
{{- $_ = set $aff "nodeAffinity" $node }}
{{- toYaml $aff }}
{{- end }}

{{/* Annotations of the pre-delete hook's objects; the argument is the weight. */}}
{{- define "latencytier.uninstallHook" -}}
helm.sh/hook: pre-delete
helm.sh/hook-weight: {{ . | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}

{{/*
The Secret (type kubernetes.io/tls with ca.crt) holding the metrics
servers' certificate: metrics.tls.secretName, or latencytier-metrics-tls,
which the cert-manager Certificate of metrics-tls.yaml writes when
metrics.tls.certManager.issuerName is set; empty (self-signed serving
certificates) when neither is. Fails on both, or on either with plain HTTP.
*/}}
{{- define "latencytier.metricsTLSSecret" -}}
{{- $tls := .Values.metrics.tls }}
{{- if and $tls.secretName $tls.certManager.issuerName }}
{{- fail "metrics.tls: set secretName or certManager.issuerName, not both" }}
{{- end }}
{{- if and (or $tls.secretName $tls.certManager.issuerName) (not .Values.metrics.secure) }}
{{- fail "metrics.tls: a serving certificate needs metrics.secure=true (plain HTTP has none)" }}
{{- end }}
{{- if $tls.secretName }}{{ $tls.secretName }}{{ else if $tls.certManager.issuerName }}latencytier-metrics-tls{{ end }}
{{- end }}

{{/* The DNS name in the metrics certificate, which the PodMonitor verifies. */}}
{{- define "latencytier.metricsServerName" -}}
{{ .Values.metrics.tls.serverName | default (printf "latencytier-metrics.%s.svc" (include "latencytier.namespace" .)) }}
{{- end }}

{{/* Where the manager and the agents mount that Secret (--metrics-cert-dir). */}}
{{- define "latencytier.metricsCertDir" -}}
/etc/latencytier/metrics-tls
{{- end }}
