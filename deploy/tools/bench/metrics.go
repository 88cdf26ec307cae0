package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fnTimes is the total time flotilla's functions spent handling events, by
// function, and the journal's append time, read from flotilla's own metrics;
// "observe_calls" counts observe's calls (a count, not a duration).
type fnTimes map[string]time.Duration

func gatherTimes(reg prometheus.Gatherer) fnTimes {
	out := fnTimes{}
	mfs, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "flotilla_function_duration_seconds":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "function" {
						out[l.GetValue()] += seconds(m.GetHistogram().GetSampleSum())
					}
				}
			}
		case "flotilla_function_calls_total":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "function" && l.GetValue() == "observe" {
						out["observe_calls"] += time.Duration(m.GetCounter().GetValue())
					}
				}
			}
		case "flotilla_journal_append_seconds":
			for _, m := range mf.GetMetric() {
				out["journal"] += seconds(m.GetHistogram().GetSampleSum())
			}
		}
	}
	return out
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (t fnTimes) sub(before fnTimes) fnTimes {
	out := fnTimes{}
	for k, v := range t {
		out[k] = v - before[k]
	}
	return out
}
