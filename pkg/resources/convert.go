package resources

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/resources/v1alpha1"
)

// Convert is an Application resource's application: its spec decoded
// strictly (a field the API does not know is an error, as in the file)
// and named after the resource. A spec naming a secret of flotilla's own
// process is refused, each such field named.
func Convert(u *unstructured.Unstructured) (config.Application, error) {
	raw, err := json.Marshal(u.Object["spec"])
	if err != nil {
		return config.Application{}, fmt.Errorf("spec: %w", err)
	}
	var spec v1alpha1.ApplicationSpec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return config.Application{}, fmt.Errorf("spec: %w", err)
	}
	if bad := borrowedSecrets(spec); len(bad) > 0 {
		return config.Application{}, fmt.Errorf("%v: name secrets of flotilla's own process (its environment or files), which a resource may not borrow; use the configuration file", bad)
	}
	return config.Application{
		Name: u.GetName(), ResourceNamespace: u.GetNamespace(), Image: spec.Image, Source: spec.Source, Track: spec.Track, Semver: spec.Semver,
		PreReleases: spec.PreReleases, TagFilter: spec.TagFilter, DenyTags: spec.DenyTags, Namespace: spec.Namespace,
		Workload: spec.Workload, Service: spec.Service, Delivery: spec.Delivery, GitOps: spec.GitOps,
		Validation: spec.Validation, OnNewVersion: spec.OnNewVersion, ClusterSelector: spec.ClusterSelector,
		FreezeWindows: spec.FreezeWindows, Poll: spec.Poll, DriftPolicy: spec.DriftPolicy,
	}, nil
}

// borrowedSecrets names the fields of spec that point at flotilla's own
// secrets (the CRD's CEL rules refuse them first).
func borrowedSecrets(spec v1alpha1.ApplicationSpec) []string {
	var out []string
	add := func(path string, set bool) {
		if set {
			out = append(out, path)
		}
	}
	if g := spec.GitOps; g != nil {
		add("spec.gitops.password", g.Password != nil)
		add("spec.gitops.token", g.Token != nil)
		add("spec.gitops.sshKeyFile", g.SSHKeyFile != "")
		add("spec.gitops.pullRequest.token", g.PullRequest != nil && g.PullRequest.Token != nil)
	}
	if g := spec.Source; g != nil && g.Git != nil {
		add("spec.source.git.password", g.Git.Password != nil)
		add("spec.source.git.token", g.Git.Token != nil)
		add("spec.source.git.sshKeyFile", g.Git.SSHKeyFile != "")
	}
	return out
}
