{{/* The release's full name: <release>-agent-platform, or the release name when it already says so. */}}
{{- define "agent-platform.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "agent-platform.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one app: pass (dict "root" $ "app" "web"). */}}
{{- define "agent-platform.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .app }}
{{- end -}}

{{- define "agent-platform.serviceAccountName" -}}
{{- default (include "agent-platform.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "agent-platform.secretName" -}}
{{- default (include "agent-platform.fullname" .) .Values.secret.existingSecret -}}
{{- end -}}

{{/* The backend's address inside the cluster: the web app calls it, and agents in their own namespace reach the AI gateway on it. */}}
{{- define "agent-platform.backendUrl" -}}
{{- printf "http://%s-backend.%s.svc.cluster.local:%v" (include "agent-platform.fullname" .) .Release.Namespace .Values.backend.port -}}
{{- end -}}

{{/*
One app's Deployment: (dict "root" $ "app" "web" "values" .Values.web). Both apps run the one
image; APP picks which (docs/production.md). Migrations run at start-up under a PostgreSQL
advisory lock (src/db/migrate.ts), so replicas starting together apply each migration once.
*/}}
{{- define "agent-platform.deployment" -}}
{{- $root := .root -}}
{{- $v := .values -}}
{{- $healthPath := ternary "/api/health" "/health" (eq .app "web") -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "agent-platform.fullname" $root }}-{{ .app }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "agent-platform.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .app }}
spec:
  replicas: {{ $v.replicas }}
  selector:
    matchLabels:
      {{- include "agent-platform.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "agent-platform.labels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ .app }}
      annotations:
        # a changed setting or secret rolls the pods
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
        {{- if not $root.Values.secret.existingSecret }}
        checksum/secret: {{ include (print $root.Template.BasePath "/secret.yaml") $root | sha256sum }}
        {{- end }}
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "agent-platform.serviceAccountName" $root }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      # SIGTERM: the app stops taking requests, finishes its workers and exits within 30 s
      terminationGracePeriodSeconds: 40
      containers:
        - name: {{ .app }}
          image: "{{ $root.Values.image.repository }}:{{ $root.Values.image.tag | default $root.Chart.AppVersion }}"
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          env:
            - name: APP
              value: {{ .app | quote }}
          envFrom:
            - configMapRef:
                name: {{ include "agent-platform.fullname" $root }}
            - secretRef:
                name: {{ include "agent-platform.secretName" $root }}
          ports:
            - name: http
              containerPort: {{ $v.port }}
              protocol: TCP
          # started: migrations done and listening; ready: answers; live: still answers
          startupProbe:
            httpGet: { path: {{ $healthPath }}, port: http }
            periodSeconds: 5
            failureThreshold: 60
          readinessProbe:
            httpGet: { path: {{ $healthPath }}, port: http }
            periodSeconds: 10
            timeoutSeconds: 5
          livenessProbe:
            httpGet: { path: {{ $healthPath }}, port: http }
            periodSeconds: 20
            timeoutSeconds: 5
            failureThreshold: 3
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          volumeMounts:
            - { name: data, mountPath: /data }
            - { name: tmp, mountPath: /tmp }
      volumes:
        # DATA_DIR holds only the start-up lock with DATABASE_URL set: scratch, lost with the pod
        - name: data
          emptyDir: { sizeLimit: {{ $root.Values.scratch.sizeLimit }} }
        - name: tmp
          emptyDir: { sizeLimit: {{ $root.Values.scratch.sizeLimit }} }
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}
