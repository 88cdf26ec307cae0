package tasks

import (
	"context"
	"fmt"
	"strings"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// ApplyImageSet applies a release set of image members
// (docs/design/release-sets.md, "Image members") to one cluster, one
// member after the other in members' order (the caller reverses it for a
// revert), each once those before it are ready: its canary applied, its
// workload set to its image with the image as the template's revision
// (canary.AnnotationRevision), then waited for until its primary runs
// that revision, its phase settled (memberReady, as a git set's member).
// The first member that fails stops the run, naming it: the members after
// it are not applied. p is the lead's run (p.Workload names it: its
// canary lists every member's); its previous image is the result's, and
// each member's is in PreviousMembers (the cluster's previous version). A
// member whose image is unchanged changes nothing and is ready at once.
// The lead alone may come without an image (the set's version has none for
// it yet): its canary is applied, listing the set's, and its workload left
// as the cluster runs it, ready at once.
func ApplyImageSet(ctx context.Context, cfg *rest.Config, p ApplyCanaryParams, members []SetMember) (ApplyCanaryResult, error) {
	var res ApplyCanaryResult
	all := imageSetCanaries(p.Workload, members)
	kube, fl, err := clientsFor(cfg)
	if err != nil {
		return res, err
	}
	for _, m := range members {
		if (m.Image == "" && m.Workload != p.Workload) || m.Canary == nil || m.Kind == KindJob {
			return res, fault.Permanent(fmt.Errorf("--%s: member %s of an image set names no image or canary, or is a Job", ParamMembers, m.Application))
		}
		c := m.Canary.DeepCopy()
		if c.Namespace == "" {
			c.Namespace = p.Namespace
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		delete(c.Annotations, canary.AnnotationWorkloads)
		if m.Workload == p.Workload && len(all) > 1 {
			c.Annotations[canary.AnnotationWorkloads] = strings.Join(all, ",")
		}
		if m.Image == "" {
			if err := applyPolicy(ctx, cfg, fl, p.Namespace, m.Objects, c); err != nil {
				return res, fmt.Errorf("%s: %w", m.Application, err)
			}
			continue
		}
		applied := time.Now()
		prev, changed, err := applyImageMember(ctx, cfg, p.Rollout, p.Namespace, p.Restart, m, c)
		if err != nil {
			return res, err
		}
		res.Changed = res.Changed || changed
		if m.Workload == p.Workload {
			res.PreviousImage = prev
		}
		if res.PreviousMembers == nil {
			res.PreviousMembers = map[string]string{}
		}
		res.PreviousMembers[m.Application] = prev
		run := memberRun{m: m, canaries: []string{c.Name}}
		if err := waitMember(ctx, kube, fl, p.Namespace, m.Image, run, applied); err != nil {
			return res, err
		}
	}
	return res, nil
}

// imageSetCanaries is the lead's list of the set's canaries: the lead's
// (its workload's name) first, then the others in members' order.
func imageSetCanaries(lead string, members []SetMember) []string {
	var all []string
	for _, m := range members {
		if m.Canary == nil {
			continue
		}
		if m.Workload == lead {
			all = append([]string{m.Canary.Name}, all...)
		} else {
			all = append(all, m.Canary.Name)
		}
	}
	return all
}

// applyImageMember applies image member m of a set's run (rollout's, in
// namespace, restart its retry's token) with canary c: its canary, and its
// image set on its workload with the image as the template's revision
// (apply-canary's patch). It returns the image the member's primary ran
// before (the cluster's previous version's entry) and whether the workload
// changed.
func applyImageMember(ctx context.Context, cfg *rest.Config, rollout, namespace, restart string, m SetMember, c *flaggerv1.Canary) (previous string, changed bool, _ error) {
	r, err := ApplyCanary(ctx, cfg, ApplyCanaryParams{
		Rollout: rollout, Namespace: namespace, Kind: m.Kind, Workload: m.Workload, Container: m.Container,
		Image: m.Image, Canary: c, Objects: m.Objects, Restart: restart, Revision: m.Image,
	})
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", m.Application, err)
	}
	return r.PreviousImage, r.Changed, nil
}
