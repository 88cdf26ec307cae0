{{/* The chart's name, for labels. */}}
{{- define "flotilla.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's objects' name. */}}
{{- define "flotilla.fullname" -}}
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

{{- define "flotilla.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "flotilla.labels" -}}
helm.sh/chart: {{ include "flotilla.chart" . }}
{{ include "flotilla.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: flotilla
{{- end }}

{{/* Labels the Service and the Deployment select the pod by. */}}
{{- define "flotilla.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flotilla.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "flotilla.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "flotilla.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image: by digest when one is given, else by tag (default appVersion). */}}
{{- define "flotilla.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "flotilla.configMapName" -}}
{{- default (printf "%s-config" (include "flotilla.fullname" .)) .Values.existingConfigMap }}
{{- end }}

{{- define "flotilla.secretName" -}}
{{- default (printf "%s-secrets" (include "flotilla.fullname" .)) .Values.existingSecret }}
{{- end }}

{{/* Where the pod finds things. */}}
{{- define "flotilla.configPath" -}}/etc/flotilla/config/config.yaml{{- end }}

{{/* The directories the chart mounts Secrets at. */}}
{{- define "flotilla.kubeconfigsDir" -}}/etc/flotilla/kubeconfigs{{- end }}
{{- define "flotilla.secretsDir" -}}/etc/flotilla/secrets{{- end }}

{{/* The strings of .v under /etc/flotilla/, one "field<TAB>file" line each,
     field the value's path from .p (config.fleet.clusters[0].kubeconfig);
     maps in key order. */}}
{{- define "flotilla.files" -}}
{{- if kindIs "map" .v }}
{{- range $k, $x := .v }}{{ include "flotilla.files" (dict "v" $x "p" (printf "%s.%s" $.p $k)) }}{{ end }}
{{- else if kindIs "slice" .v }}
{{- range $i, $x := .v }}{{ include "flotilla.files" (dict "v" $x "p" (printf "%s[%d]" $.p $i)) }}{{ end }}
{{- else if and (kindIs "string" .v) (hasPrefix "/etc/flotilla/" .v) }}
{{- printf "%s\t%s\n" .p .v }}
{{- end }}
{{- end }}

{{/* Whether .file is .dir or under it: "true" or "". */}}
{{- define "flotilla.under" -}}
{{- if or (eq .file .dir) (hasPrefix (printf "%s/" (trimSuffix "/" .dir)) .file) }}true{{ end }}
{{- end }}

{{/* The values the rendered config needs, which a schema cannot say: every
     file it names under /etc/flotilla/kubeconfigs needs
     kubeconfigs.existingSecret, every one under /etc/flotilla/secrets needs
     existingSecret or `secrets` (holding that key), every one under
     /etc/flotilla/registries/NAME registrySecrets naming NAME, unless extraVolumeMounts
     mounts something there. Without them the pod's config check would fail
     forever; with this, helm install fails first, naming the value to set.
     An existingConfigMap is not read: flotilla's config check judges it. */}}
{{- define "flotilla.validate" -}}
{{- if not .Values.existingConfigMap }}
{{- $kubeDir := include "flotilla.kubeconfigsDir" . }}
{{- $secDir := include "flotilla.secretsDir" . }}
{{- $kube := list }}
{{- $sec := list }}
{{- $keys := list }}
{{- $lacking := list }}
{{- $reg := list }}
{{- range splitList "\n" (include "flotilla.files" (dict "v" .Values.config "p" "config")) }}
{{- if . }}
{{- $f := splitn "\t" 2 . }}
{{- $field := $f._0 }}
{{- $file := $f._1 }}
{{- $mounted := false }}
{{- range $.Values.extraVolumeMounts }}
{{- if include "flotilla.under" (dict "file" $file "dir" .mountPath) }}{{ $mounted = true }}{{ end }}
{{- end }}
{{- $reads := printf "%s reads %s" $field $file }}
{{- if $mounted }}
{{- else if include "flotilla.under" (dict "file" $file "dir" $kubeDir) }}
{{- if not $.Values.kubeconfigs.existingSecret }}{{ $kube = append $kube $reads }}{{ end }}
{{- else if include "flotilla.under" (dict "file" $file "dir" $secDir) }}
{{- $key := trimPrefix (printf "%s/" $secDir) $file }}
{{- if $.Values.existingSecret }}
{{- else if not $.Values.secrets }}
{{- $sec = append $sec $reads }}
{{- $keys = append $keys (printf "secrets.%s" $key) }}
{{- else if not (hasKey $.Values.secrets $key) }}
{{- $lacking = append $lacking (printf "%s (set secrets.%s)" $reads $key) }}
{{- end }}
{{- else if include "flotilla.under" (dict "file" $file "dir" (include "flotilla.registriesDir" $)) }}
{{- $name := index (splitList "/" (trimPrefix (printf "%s/" (include "flotilla.registriesDir" $)) $file)) 0 }}
{{- if not (has $name $.Values.registrySecrets) }}{{ $reg = append $reg (printf "%s (add %s to registrySecrets)" $reads $name) }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- $problems := list }}
{{- with $reg }}
{{- $problems = append $problems (printf "registrySecrets lacks a Secret the config reads: %s" (join ", " .)) }}
{{- end }}
{{- with $kube }}
{{- $problems = append $problems (printf "kubeconfigs.existingSecret is required: %s (a Secret of the kubeconfig files, mounted at %s: flotilla fleet bootstrap --write-kubeconfigs DIR writes them, kubectl create secret generic NAME --from-file=DIR holds them)" (join ", " .) $kubeDir) }}
{{- end }}
{{- with $sec }}
{{- $problems = append $problems (printf "secrets or existingSecret is required: %s (set %s, or existingSecret: a Secret with those keys; mounted at %s)" (join ", " .) (join ", " (uniq $keys | sortAlpha)) $secDir) }}
{{- end }}
{{- with $lacking }}
{{- $problems = append $problems (printf "secrets lacks a file the config reads: %s" (join ", " .)) }}
{{- end }}
{{- with $problems }}
{{- fail (printf "values: the config reads files no value mounts:\n%s" (join "\n" .)) }}
{{- end }}
{{- end }}
{{- if and .Values.fleetRollouts.enabled (not .Values.serviceAccount.automountToken) }}
{{- fail "values: fleetRollouts.enabled needs serviceAccount.automountToken: true: flotilla writes the FleetRollouts with the pod's service account" }}
{{- end }}
{{- if and .Values.applicationResources.enabled (not .Values.serviceAccount.automountToken) }}
{{- fail "values: applicationResources.enabled needs serviceAccount.automountToken: true: flotilla reads the Applications with the pod's service account" }}
{{- end }}
{{- if and .Values.clusterDiscovery.argocd.enabled (not .Values.serviceAccount.automountToken) }}
{{- fail "values: clusterDiscovery.argocd.enabled needs serviceAccount.automountToken: true: flotilla reads Argo CD's cluster Secrets with the pod's service account" }}
{{- end }}
{{- if and .Values.clusterDiscovery.clusterProfiles.enabled (not .Values.serviceAccount.automountToken) }}
{{- fail "values: clusterDiscovery.clusterProfiles.enabled needs serviceAccount.automountToken: true: flotilla reads the ClusterProfiles with the pod's service account" }}
{{- end }}
{{- if and .Values.clusterDiscovery.clusterAPI.enabled (not .Values.serviceAccount.automountToken) }}
{{- fail "values: clusterDiscovery.clusterAPI.enabled needs serviceAccount.automountToken: true: flotilla reads Cluster API's Clusters and kubeconfig Secrets with the pod's service account" }}
{{- end }}
{{- if and .Values.clusterDiscovery.clusterProfiles.enabled (not .Values.clusterDiscovery.clusterProfiles.providers) }}
{{- fail "values: clusterDiscovery.clusterProfiles.enabled needs clusterDiscovery.clusterProfiles.providers: the access providers whose exec plugin gives the clusters' credentials" }}
{{- end }}
{{- if and .Values.scaleOut.enabled .Values.persistence.enabled }}
{{- fail "values: scaleOut.enabled needs persistence.enabled: false: the replicas keep their state in NATS, and one ReadWriteOnce claim cannot serve them all" }}
{{- end }}
{{- end }}

{{/* The config flotilla reads: .Values.config, and in scale-out mode its
     server.bus from .Values.scaleOut (each replica named by its pod, through
     $POD_NAME). */}}
{{- define "flotilla.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- if .Values.scaleOut.enabled }}
{{- $server := deepCopy (default (dict) $cfg.server) }}
{{- $n := .Values.scaleOut.nats }}
{{- $bus := dict "url" $n.url "stream" $n.stream "replicas" $n.streamReplicas "partitions" $n.partitions }}
{{- if $n.credentialsSecret }}{{ $_ := set $bus "credentialsFile" (printf "%s/nats.creds" (include "flotilla.natsDir" .)) }}{{ end }}
{{- $_ := set $server "bus" $bus }}
{{- $_ := set $cfg "server" $server }}
{{- end }}
{{- if .Values.registrySecrets }}
{{- $reg := deepCopy (default (dict) $cfg.registries) }}
{{- $files := default (list) $reg.dockerConfigFiles }}
{{- range .Values.registrySecrets }}
{{- $f := printf "%s/%s/.dockerconfigjson" (include "flotilla.registriesDir" $) . }}
{{- if not (has $f $files) }}{{ $files = append $files $f }}{{ end }}
{{- end }}
{{- $_ := set $reg "dockerConfigFiles" $files }}
{{- $_ := set $cfg "registries" $reg }}
{{- end }}
{{- if .Values.fleetRollouts.enabled }}
{{- $server := deepCopy (default (dict) $cfg.server) }}
{{- $_ := set $server "fleetRollouts" (dict "namespace" .Release.Namespace) }}
{{- $_ := set $cfg "server" $server }}
{{- end }}
{{- if .Values.applicationResources.enabled }}
{{- $server := deepCopy (default (dict) $cfg.server) }}
{{- $resources := dict "namespaces" .Values.applicationResources.namespaces }}
{{- with .Values.applicationResources.platformNamespaces }}
{{- $_ := set $resources "platformNamespaces" . }}
{{- end }}
{{- $_ := set $server "resources" $resources }}
{{- $_ := set $cfg "server" $server }}
{{- end }}
{{- if or .Values.clusterDiscovery.argocd.enabled .Values.clusterDiscovery.clusterProfiles.enabled .Values.clusterDiscovery.clusterAPI.enabled }}
{{- $fleet := deepCopy (default (dict) $cfg.fleet) }}
{{- $disc := dict }}
{{- if .Values.clusterDiscovery.argocd.enabled }}
{{- $a := .Values.clusterDiscovery.argocd }}
{{- $_ := set $disc "argocd" (dict "namespace" $a.namespace "selector" $a.selector) }}
{{- end }}
{{- if .Values.clusterDiscovery.clusterProfiles.enabled }}
{{- $p := .Values.clusterDiscovery.clusterProfiles }}
{{- $_ := set $disc "clusterProfiles" (dict "namespaces" $p.namespaces "selector" $p.selector "providers" $p.providers) }}
{{- end }}
{{- if .Values.clusterDiscovery.clusterAPI.enabled }}
{{- $c := .Values.clusterDiscovery.clusterAPI }}
{{- $_ := set $disc "clusterAPI" (dict "namespaces" $c.namespaces "selector" $c.selector) }}
{{- end }}
{{- $_ := set $fleet "discovery" $disc }}
{{- $_ := set $cfg "fleet" $fleet }}
{{- end }}
{{- if .Values.apiToken.enabled }}
{{- $server := deepCopy (default (dict) $cfg.server) }}
{{- $tokens := default (list) $server.apiTokens }}
{{- $tokens = append $tokens (dict "name" .Values.apiToken.name "secret" (dict "file" (printf "%s/token" (include "flotilla.apiTokenDir" .)))) }}
{{- $_ := set $server "apiTokens" $tokens }}
{{- $_ := set $cfg "server" $server }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* The API token's Secret (key token): apiToken.existingSecret, or the one
     the chart generates. */}}
{{- define "flotilla.apiTokenSecretName" -}}
{{- default (printf "%s-api-token" (include "flotilla.fullname" .)) .Values.apiToken.existingSecret }}
{{- end }}
{{- define "flotilla.apiTokenDir" -}}/etc/flotilla/api-token{{- end }}

{{- define "flotilla.natsDir" -}}/etc/flotilla/nats{{- end }}
{{- define "flotilla.registriesDir" -}}/etc/flotilla/registries{{- end }}
