{{/* The manager's image reference. */}}
{{- define "latencytier.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}

{{/* The agent's image reference: agent.image, else the manager's. */}}
{{- define "latencytier.agentImage" -}}
{{ .Values.agent.image | default (include "latencytier.image" .) }}
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

{{/* Annotations of the pre-delete hook's objects; the argument is the weight. */}}
{{- define "latencytier.uninstallHook" -}}
helm.sh/hook: pre-delete
helm.sh/hook-weight: {{ . | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}
