// Package freeze computes freeze windows: recurring stretches of time (a
// cron start or an RFC 5545 recurrence rule, a duration, a time zone)
// during which no wave of a rollout starts. It imports nothing of
// flotilla: the config checks windows with it, launch holds waves with it.
package freeze
