package config

// Config is flotilla's whole configuration, as returned by Load and Parse:
// defaults applied, paths absolute, secrets resolved and everything validated.
type Config struct {
	Server       Server        `json:"server"`
	Events       Events        `json:"events"`
	Receivers    []Receiver    `json:"receivers"`
	Fleet        Fleet         `json:"fleet"`
	Applications []Application `json:"applications"`
}

// Server configures flotilla's own HTTP server.
type Server struct {
	// Listen is the address to listen on, host:port. Default "127.0.0.1:8080".
	Listen string `json:"listen"`
	// DataDir holds flotilla's state. Relative paths resolve against the
	// config file's directory; Load makes it absolute. Default "flotilla-data".
	DataDir string `json:"dataDir"`
	// ExternalURL is the http(s) URL at which the clusters' Flagger reach
	// flotilla (for its webhooks). Default "http://" + Listen, with an empty or
	// unspecified host (":8080", "0.0.0.0:8080") replaced by 127.0.0.1.
	ExternalURL string `json:"externalURL"`
}

// Events configures where CloudEvents go besides flotilla's own functions.
type Events struct {
	// Sink is an optional http(s) URL to which every CloudEvent is mirrored.
	Sink string `json:"sink"`
}

// Receiver is one inbound webhook endpoint, served at POST /hooks/<name>.
type Receiver struct {
	// Name is a DNS label ([a-z0-9-], at most 63), unique among receivers.
	Name string `json:"name"`
	// Type is the sender: one of ReceiverTypes.
	Type string `json:"type"`
	// Secret authenticates the sender. Required unless Insecure.
	Secret *Secret `json:"secret"`
	// Insecure accepts unauthenticated requests; it excludes Secret.
	Insecure bool `json:"insecure"`
	// SecretValue is the resolved secret, set by Load. Never marshalled.
	SecretValue string `json:"-"`
}

// Receiver types.
const (
	ReceiverDistribution = "distribution" // a CNCF distribution registry's notifications
	ReceiverGitHub       = "github"       // GitHub webhooks (package and push events)
	ReceiverFlagger      = "flagger"      // Flagger's canary webhooks and alerts
)

// ReceiverTypes lists the receiver types a config may name.
var ReceiverTypes = []string{ReceiverDistribution, ReceiverGitHub, ReceiverFlagger}

// Secret names where a secret comes from: exactly one of Env and File.
type Secret struct {
	// Env names an environment variable that must be set and non-empty.
	Env string `json:"env"`
	// File is a file that must exist and be non-empty once trailing newlines
	// are trimmed. Relative paths resolve against the config file's
	// directory; Load makes it absolute.
	File string `json:"file"`
}

// Fleet is the set of clusters flotilla delivers to and the waves that order
// them.
type Fleet struct {
	// Executor runs the rollout pipelines: one of Executors. Default
	// "embedded".
	Executor string `json:"executor"`
	// Clusters are the fleet's clusters; at least one.
	Clusters []Cluster `json:"clusters"`
	// Waves are rolled out one after another; every cluster is in exactly
	// one wave.
	Waves []Wave `json:"waves"`
}

// Executors.
const (
	ExecutorEmbedded = "embedded" // pipelines run inside flotilla's process
)

// Executors lists the executors a config may name.
var Executors = []string{ExecutorEmbedded}

// Cluster is one Kubernetes cluster of the fleet.
type Cluster struct {
	// Name is a DNS label, unique among clusters.
	Name string `json:"name"`
	// Kubeconfig is the path of the cluster's kubeconfig, which must exist.
	// Relative paths resolve against the config file's directory; Load makes
	// it absolute. Required.
	Kubeconfig string `json:"kubeconfig"`
	// Context is the kubeconfig context to use; empty means its current one.
	Context string `json:"context"`
	// Labels are Kubernetes-style labels describing the cluster.
	Labels map[string]string `json:"labels"`
}

// Wave is a group of clusters rolled out together.
type Wave struct {
	// Name is a DNS label, unique among waves. Default "wave-<n>", n 1-based.
	Name string `json:"name"`
	// Clusters names clusters of the fleet; at least one.
	Clusters []string `json:"clusters"`
}

// Application is one workload whose image flotilla tracks and delivers.
type Application struct {
	// Name is a DNS label, unique among applications.
	Name string `json:"name"`
	// Image is the repository to track, "host[:port]/path", with an explicit
	// registry host and without tag or digest.
	Image string `json:"image"`
	// Track is the version policy. Default TrackMinorVersion.
	Track Track `json:"track"`
	// Namespace holds the workload in every cluster. Default "default".
	Namespace string `json:"namespace"`
	// Workload is the object whose image flotilla updates.
	Workload Workload `json:"workload"`
	// Service is the port the workload serves on.
	Service Service `json:"service"`
	// Delivery is the progressive-delivery policy (a Flagger canary).
	Delivery Delivery `json:"delivery"`
}

// Track is a semver version policy, as KubeCD's upgrade triggers define
// them: which new tags count as an upgrade of the running one.
type Track string

// Tracks.
const (
	TrackPatchLevel   Track = "PatchLevel"   // patch releases of the same major.minor
	TrackMinorVersion Track = "MinorVersion" // minor and patch releases of the same major
	TrackMajorVersion Track = "MajorVersion" // any higher semver version
	TrackNewest       Track = "Newest"       // the most recently created tag
)

// Tracks lists the tracks a config may name.
var Tracks = []Track{TrackPatchLevel, TrackMinorVersion, TrackMajorVersion, TrackNewest}

// Workload is the Kubernetes object running an application.
type Workload struct {
	// Kind is one of WorkloadKinds. Default "Deployment".
	Kind string `json:"kind"`
	// Name is the object's name. Required.
	Name string `json:"name"`
	// Container names the container whose image is updated; empty means the
	// first container.
	Container string `json:"container"`
}

// WorkloadKinds lists the workload kinds a config may name.
var WorkloadKinds = []string{"Deployment"}

// Service is the port an application serves on, for Flagger's services.
type Service struct {
	// Port is 1..65535. Required.
	Port int32 `json:"port"`
}

// Delivery is an application's progressive-delivery policy.
type Delivery struct {
	// Strategy is one of Strategies. Default "blueGreen".
	Strategy string `json:"strategy"`
	// Interval is Flagger's analysis interval, at least 1s. Default 1m.
	Interval Duration `json:"interval"`
	// Iterations is the number of blue/green analysis runs, at least 1.
	// Default 10.
	Iterations int `json:"iterations"`
	// Threshold is the number of failed checks before rollback, at least 1.
	// Default 5.
	Threshold int `json:"threshold"`
	// ProgressDeadline bounds how long a canary may make no progress, at
	// least 1s. Default 10m.
	ProgressDeadline Duration `json:"progressDeadline"`
	// Webhooks are Flagger webhooks added to the canary's analysis.
	Webhooks []Webhook `json:"webhooks"`
}

// Strategies.
const (
	StrategyBlueGreen = "blueGreen"
)

// Strategies lists the delivery strategies a config may name.
var Strategies = []string{StrategyBlueGreen}

// Webhook is one Flagger webhook of a canary's analysis.
type Webhook struct {
	// Name is required and unique within the application.
	Name string `json:"name"`
	// Type is one of WebhookTypes. Default "rollout", as in Flagger.
	Type string `json:"type"`
	// URL is an absolute http(s) URL. Required.
	URL string `json:"url"`
	// Timeout bounds each call. Default 10s, as in Flagger.
	Timeout Duration `json:"timeout"`
	// Metadata is passed to the webhook.
	Metadata map[string]string `json:"metadata"`
}

// WebhookTypes lists Flagger's webhook types.
var WebhookTypes = []string{
	"confirm-rollout",
	"pre-rollout",
	"rollout",
	"confirm-traffic-increase",
	"confirm-promotion",
	"post-rollout",
	"rollback",
	"event",
}

// Application returns the application with the given name.
func (c *Config) Application(name string) (Application, bool) {
	for _, a := range c.Applications {
		if a.Name == name {
			return a, true
		}
	}
	return Application{}, false
}

// Cluster returns the cluster with the given name.
func (c *Config) Cluster(name string) (Cluster, bool) {
	for _, cl := range c.Fleet.Clusters {
		if cl.Name == name {
			return cl, true
		}
	}
	return Cluster{}, false
}

// Receiver returns the receiver with the given name.
func (c *Config) Receiver(name string) (Receiver, bool) {
	for _, r := range c.Receivers {
		if r.Name == name {
			return r, true
		}
	}
	return Receiver{}, false
}
