// Package reload puts a new configuration in force in a running flotilla:
// the one swap every source of configuration goes through (the file and
// the Application resources of the management cluster, pkg/resources,
// which build the file's configuration with theirs), and the file's watch
// that feeds it.
//
// The rule of the swap: the new configuration is built and validated first
// (for the file, config.Load: what `flotilla config check` runs); an
// invalid one is refused; one that changes a field a running flotilla
// cannot take live (config.RestartFields) is refused whole; otherwise it
// replaces the old one at once in the config.Live every consumer reads per
// event. A refused configuration leaves the running one as it was, and
// says why in the log (error level) and in flotilla_config_reloads_total.
//
// The file is watched by its content's hash, read every few seconds, and
// reloaded on SIGHUP: a hash sees an editor's rename, a ConfigMap's
// symlink swap and a file on a volume inotify does not reach alike, and
// needs no watch of the directory (Prometheus' auto-reload-config does
// the same).
package reload
