package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// Application is one application of flotilla's configuration as a
// resource of the management cluster: what the configuration file's
// applications[] entry says, its name the resource's. flotilla adds it to
// the file's applications, validated with them as one configuration, and
// says in the Ready condition whether it took it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=fapp,categories=flotilla
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Deployed",type=string,JSONPath=`.status.deployed.tag`
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.rollout.tag`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.rollout.phase`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name: an application's name is a DNS label (lower-case letters, digits and '-', at most 63)"
type Application struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:Required
	Spec   ApplicationSpec   `json:"spec"`
	Status ApplicationStatus `json:"status,omitempty"`
}

// ApplicationList is a list of Applications.
//
// +kubebuilder:object:root=true
type ApplicationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Application `json:"items"`
}

// ApplicationSpec is config.Application without its name (the resource's)
// and Kurator's aliases: the same fields, names, defaults and meanings
// (docs: config/example.yaml). Not here (yet): verify, whose signature
// policies only a restart compiles. Refused in a resource (a CEL rule,
// and pkg/resources again): the fields naming a secret of flotilla's own
// process (an environment variable or a file of its pod) — password,
// token and sshKeyFile of gitops, gitops.pullRequest and source.git —
// which a team's resource must not borrow.
//
// +kubebuilder:object:generate=false
// +kubebuilder:validation:XValidation:rule="has(self.image) != has(self.source)",message="set either image or source.git: an application follows an image repository or a git repository"
// +kubebuilder:validation:XValidation:rule="!has(self.image) || !self.image.contains('@')",message="image: includes a digest; want a repository host[:port]/path without tag or digest"
// +kubebuilder:validation:XValidation:rule="has(self.workload.name) && self.workload.name.size() > 0",message="workload.name: required"
// +kubebuilder:validation:XValidation:rule="has(self.service.port) && self.service.port >= 1 && self.service.port <= 65535",message="service.port: required, the port the workload serves on, 1..65535"
// +kubebuilder:validation:XValidation:rule="!has(self.gitops) || (!has(self.gitops.password) && !has(self.gitops.token) && !has(self.gitops.sshKeyFile) && (!has(self.gitops.pullRequest) || !has(self.gitops.pullRequest.token)))",message="gitops: password, token, sshKeyFile and pullRequest.token name secrets of flotilla's own process and are refused in a resource; use gitops.secret (the tekton executor) or the configuration file"
// +kubebuilder:validation:XValidation:rule="!has(self.source) || !has(self.source.git) || (!has(self.source.git.password) && !has(self.source.git.token) && !has(self.source.git.sshKeyFile))",message="source.git: password, token and sshKeyFile name secrets of flotilla's own process and are refused in a resource; use source.git.secret (the tekton executor) or the configuration file"
type ApplicationSpec struct {
	// Image is the repository to track, "host[:port]/path", without tag
	// or digest. Exactly one of image and source.
	Image string `json:"image,omitempty"`
	// Source, instead of image, follows a git repository.
	Source *config.Source `json:"source,omitempty"`
	// Track is the version policy. Default MinorVersion.
	// +kubebuilder:validation:Enum=PatchLevel;MinorVersion;MajorVersion;Newest
	Track config.Track `json:"track,omitempty"`
	// Semver narrows a semantic track with a constraint (">=1.2, <2").
	Semver string `json:"semver,omitempty"`
	// PreReleases lets pre-release versions roll out.
	PreReleases bool `json:"preReleases,omitempty"`
	// TagFilter admits only the tags its pattern matches.
	TagFilter *config.TagFilter `json:"tagFilter,omitempty"`
	// DenyTags: a tag one of these regular expressions matches in full
	// never rolls out.
	DenyTags []string `json:"denyTags,omitempty"`
	// Namespace holds the workload in every cluster. Default "default".
	Namespace string `json:"namespace,omitempty"`
	// Workload is the object whose image flotilla updates.
	// +kubebuilder:validation:Required
	Workload config.Workload `json:"workload"`
	// Service is the port the workload serves on.
	// +kubebuilder:validation:Required
	Service config.Service `json:"service"`
	// Delivery is the progressive-delivery policy (a Flagger canary).
	Delivery config.Delivery `json:"delivery,omitzero"`
	// GitOps keeps the image in a deployments repository too.
	GitOps *config.GitOps `json:"gitops,omitempty"`
	// Validation is Kanary's validation of the canaries.
	Validation *config.Validation `json:"validation,omitempty"`
	// OnNewVersion: what a newer version does to the rollout in flight.
	// Default supersede.
	// +kubebuilder:validation:Enum=supersede;queue
	OnNewVersion string `json:"onNewVersion,omitempty"`
	// ClusterSelector limits the application to the clusters whose labels
	// it matches (it must match one).
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// FreezeWindows hold this application's rollouts only.
	FreezeWindows []config.FreezeWindow `json:"freezeWindows,omitempty"`
	// Poll overrides fleet.poll for this application.
	Poll *config.Poll `json:"poll,omitempty"`
	// DriftPolicy: report (the default) or revert.
	// +kubebuilder:validation:Enum=report;revert
	DriftPolicy string `json:"driftPolicy,omitempty"`
}

// ApplicationStatus is what flotilla made of the resource and of the
// application.
type ApplicationStatus struct {
	// ObservedGeneration is the generation the conditions speak of.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is True when the application is in flotilla's
	// configuration in force; False with reason Invalid (the validator's
	// problems in the message), NameConflict (another application, of the
	// file or an older resource, has the name), ProjectConflict (a project
	// lists the application, but the resource's namespace is not that
	// project's: projects[].namespaces) or NotApplied (valid, but
	// the configuration it belongs to was refused: the message says why).
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastSeen is the last push of the application flotilla saw.
	LastSeen *Version `json:"lastSeen,omitempty"`
	// LastSkipped is the last push that started no rollout, and why.
	LastSkipped *Version `json:"lastSkipped,omitempty"`
	// Deployed is the version the whole fleet last converged on.
	Deployed *Version `json:"deployed,omitempty"`
	// Rollout is the latest rollout (in flight, or the one that ended
	// last).
	Rollout *Rollout `json:"rollout,omitempty"`
}

// Version is a version of the application flotilla saw, skipped or rolled
// out.
type Version struct {
	Tag    string `json:"tag,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Rollout is the rollout that brought it (Deployed).
	Rollout string `json:"rollout,omitempty"`
	// Source is webhook or poll (LastSeen, LastSkipped).
	Source string `json:"source,omitempty"`
	// Outcome is skipped or rejected, Reason why (LastSkipped).
	Outcome string `json:"outcome,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// At is when flotilla saw it (or the fleet converged on it).
	At *metav1.Time `json:"at,omitempty"`
}

// Rollout is where a rollout of the application stands.
type Rollout struct {
	// ID is flotilla's id of the rollout (flotilla describe ID).
	ID string `json:"id"`
	// Tag is the version it rolls out.
	Tag string `json:"tag,omitempty"`
	// Phase: Queued, Progressing, Paused, Succeeded, Failed, RolledBack...
	Phase string `json:"phase,omitempty"`
	// Wave is "2/3 prod-eu": the current wave of the waves' count.
	Wave string `json:"wave,omitempty"`
	// Clusters is "5/8": the clusters that succeeded of the rollout's.
	Clusters string `json:"clusters,omitempty"`
	// Waiting says what it waits for; Reason why it ended as it did.
	Waiting string `json:"waiting,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Condition types and reasons of an Application.
const (
	ConditionReady = "Ready"

	ReasonApplied      = "Applied"
	ReasonInvalid      = "Invalid"
	ReasonNameConflict = "NameConflict"
	ReasonNotApplied   = "NotApplied"
	// ReasonProjectConflict: a project lists the application by name, but
	// the resource's namespace is another project's (projects[].namespaces).
	ReasonProjectConflict = "ProjectConflict"
)
