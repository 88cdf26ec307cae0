{{- define "podinfo.name" -}}{{ .Release.Name }}{{- end -}}
