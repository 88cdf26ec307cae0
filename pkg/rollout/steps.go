package rollout

import (
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
)

// RequestRun starts a new step of cluster c (the caller sets its phase): a
// pipeline run request for purpose and the step's deadline timer, both
// derived from cause. The cluster records the step, its run and deadline.
func (r *Rollout) RequestRun(cause cloudevents.Event, c *Cluster, purpose, image, tag string, deadline time.Time) ([]cloudevents.Event, error) {
	_, wave, err := r.Cluster(c.Name)
	if err != nil {
		return nil, err
	}
	c.Step++
	c.Run, c.Deadline = purpose, deadline
	step := fmt.Sprintf("%s/%s/%d", c.Name, purpose, c.Step)
	req, err := events.Derive(cause, events.TypePipelineRunRequested, step, events.PipelineRunRequested{
		RolloutID: r.ID, Application: r.Application, Wave: wave, Cluster: c.Name,
		Purpose: purpose, Step: c.Step, Image: image, Tag: tag, Deadline: deadline,
		Restart: restart(r, c, purpose),
	})
	if err != nil {
		return nil, err
	}
	req.SetSubject(c.Name)
	due, err := events.Derive(cause, events.TypeClusterDeadline, step, events.ClusterDeadline{
		RolloutID: r.ID, Wave: wave, Cluster: c.Name, Purpose: purpose, Step: c.Step,
	})
	if err != nil {
		return nil, err
	}
	due.SetSubject(c.Name)
	return []cloudevents.Event{req, events.At(due, deadline)}, nil
}

// restart is the token an apply of a retried cluster puts on the workload's
// pod template, so Flagger sees a new revision of the same image.
func restart(r *Rollout, c *Cluster, purpose string) string {
	if c.Retry == 0 || purpose != events.PurposeApply {
		return ""
	}
	return fmt.Sprintf("%s/%d", r.ID, c.Retry)
}
