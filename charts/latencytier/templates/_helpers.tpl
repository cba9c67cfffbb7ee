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
