{{/* Names, labels and checks shared by every template. */}}

{{- define "valkey-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "valkey-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "valkey-operator.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "valkey-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "valkey-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- /* The selector labels as a label selector string: key=value,key=value. */ -}}
{{- define "valkey-operator.selector" -}}
{{- $pairs := list }}
{{- range $key, $value := fromYaml (include "valkey-operator.selectorLabels" .) }}
{{- $pairs = append $pairs (printf "%s=%s" $key $value) }}
{{- end }}
{{- join "," $pairs }}
{{- end -}}

{{- /* The operator pods' labels: no chart version, so a chart upgrade alone does not roll them. */ -}}
{{- define "valkey-operator.podLabels" -}}
{{ include "valkey-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "valkey-operator.labels" -}}
{{ include "valkey-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "valkey-operator.serviceAccountName" -}}
{{- default (include "valkey-operator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "valkey-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{- /* The CRDs the chart carries: file path -> CRD name. */ -}}
{{- define "valkey-operator.crdNames" -}}
{{- range $path, $_ := .Files.Glob "files/crds/*.yaml" }}
- {{ ($.Files.Get $path | fromYaml).metadata.name }}
{{- end }}
{{- end -}}

{{- /*
Values the schema cannot compare with each other, refused with a message instead of an operator
that crash-loops (the same ports) or two replicas that both reconcile (no leader election).
*/ -}}
{{- define "valkey-operator.validate" -}}
{{- if eq (int .Values.metrics.port) (int .Values.healthProbePort) }}
{{- fail (printf "metrics.port and healthProbePort are both %d: the operator refuses two listeners on one port; pick another for one of them" (int .Values.metrics.port)) }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicaCount %d needs leaderElection.enabled=true: without it every replica reconciles the same clusters at once (set replicaCount=1, or enable leader election)" (int .Values.replicaCount)) }}
{{- end }}
{{- $pdb := .Values.podDisruptionBudget }}
{{- if and $pdb.enabled (not (kindIs "invalid" $pdb.minAvailable)) (not (kindIs "invalid" $pdb.maxUnavailable)) }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both" }}
{{- end }}
{{- end -}}
