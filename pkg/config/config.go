package config

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tektoncd/pipeline/pkg/apis/pipeline/pod"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-cd/flotilla/pkg/freeze"
)

// Config is flotilla's whole configuration, as returned by Load and Parse:
// defaults applied, paths absolute, secrets resolved and everything validated.
type Config struct {
	Server       Server        `json:"server"`
	Events       Events        `json:"events"`
	Telemetry    Telemetry     `json:"telemetry"`
	Receivers    []Receiver    `json:"receivers"`
	Fleet        Fleet         `json:"fleet"`
	Applications []Application `json:"applications"`
	// Registries are the credentials flotilla reads the applications'
	// registries with (tags, digests, signatures). Unset: the Docker config
	// of flotilla's user ($DOCKER_CONFIG/config.json) and its credential
	// helpers, which is also tried last when it is set.
	Registries *Registries `json:"registries"`
	// Projects group the applications and grant roles in each
	// (pkg/authz). With neither projects nor rbac, every authenticated
	// principal may do everything.
	Projects []Project `json:"projects"`
	// RBAC is casbin policy on top of the projects' roles, and the role
	// every authenticated principal has.
	RBAC *RBAC `json:"rbac"`
	// KubeCD adds the applications, clusters and waves of a repository's
	// KubeCD files (environments.yaml, releases.yaml).
	KubeCD *KubeCD `json:"kubecd"`
	// ReleaseSets are applications promoted together: one rollout of the
	// set's commit, members applied in dependsOn order in each cluster
	// (docs/design/release-sets.md).
	ReleaseSets []ReleaseSet `json:"releaseSets"`
}

// Registries are where registry credentials come from, tried in this
// order for an image: the Docker config files (the first with an entry
// for the image), the providers, then flotilla's user's Docker config.
type Registries struct {
	// DockerConfigFiles are Docker config files: the .dockerconfigjson of
	// a kubernetes.io/dockerconfigjson Secret (`kubectl create secret
	// docker-registry`), mounted, or a config.json with "auths". Entries
	// match an image as the kubelet matches image pull secrets (host[:port],
	// an optional path prefix, "*" for one host label; the longest first).
	// Each is read again when it changes: a rotated Secret needs no restart.
	DockerConfigFiles []string `json:"dockerConfigFiles"`
	// Providers are cloud providers whose workload identity reads their
	// own registries: aws (ECR: IRSA, EKS Pod Identity, the AWS SDK's
	// default chain), gcp (Artifact Registry and Container Registry:
	// workload identity, Application Default Credentials), azure (ACR:
	// AKS workload identity, a service principal or managed identity in
	// the environment). Each answers only for its own registries' hosts.
	Providers []string `json:"providers"`
}

// RegistryProviders are the names Registries.Providers accepts.
var RegistryProviders = []string{"aws", "azure", "gcp"}

// Server configures flotilla's own HTTP server.
type Server struct {
	// Listen is the address to listen on, host:port. Default "127.0.0.1:8080".
	Listen string `json:"listen"`
	// DataDir holds flotilla's state. Relative paths resolve against the
	// config file's directory; Load makes it absolute. Default "flotilla-data".
	DataDir string `json:"dataDir"`
	// ExternalURL is the http(s) URL at which the clusters' Flagger reach
	// flotilla (for its webhooks). Default "http://" + the address flotilla
	// listens on (--listen overrides Listen, not ExternalURL), with an empty
	// or unspecified host (":8080", "0.0.0.0:8080") replaced by 127.0.0.1:
	// see [ExternalURLFor].
	ExternalURL string `json:"externalURL"`
	// Instance names this flotilla: every object it creates in the clusters
	// is labelled flotilla.dev/instance=<instance>, and it removes only
	// objects with its own label. Flotillas sharing clusters need different
	// instances. A DNS label; default "flotilla".
	Instance string `json:"instance"`
	// Workers bounds the functions flotilla runs at once. The events of one
	// rollout (or of one image or git repository, before a rollout starts)
	// are handled in order, one at a time; different ones in parallel, up
	// to Workers, so one slow cluster never holds up another rollout. In
	// scale-out mode the bound is each replica's, however many partitions
	// it holds. 1-1024; default 16.
	Workers int `json:"workers"`
	// Retention is how long the journal keeps events that every consumer
	// has handled; older segments are deleted. "0s" keeps every event.
	// Default 168h (a week).
	Retention *Duration `json:"retention"`
	// DedupeWindow is how long an event id is remembered, so that a
	// sender's redelivery of the same webhook (same delivery id) is
	// dropped rather than handled twice (senders retry for hours). Default
	// 24h.
	DedupeWindow Duration `json:"dedupeWindow"`
	// DedupeMaxEvents bounds the ids remembered (about 30 bytes of memory
	// each): under a flood, ids older than the last DedupeMaxEvents events
	// are forgotten before DedupeWindow has passed. 0: no bound by number.
	// Default 1000000.
	DedupeMaxEvents *int `json:"dedupeMaxEvents"`
	// APIToken authenticates the API and the web UI: "Authorization:
	// Bearer <token>", or the UI's session opened by logging in with it;
	// what it does is recorded as done by "default". Without it or
	// APITokens, every API call and UI page is refused (unless
	// AnonymousRead opens the reads).
	APIToken *Secret `json:"apiToken"`
	// APITokenValue is the resolved APIToken, set by Load. Never marshalled.
	APITokenValue string `json:"-"`
	// APITokens are named API tokens: a control (approve, retry, pause,
	// abort, stop the fleet, ...) is recorded as done by the name of the
	// token that authorized it. apiToken, if set too, is named "default".
	APITokens []APIToken `json:"apiTokens"`
	// AnonymousRead opens the reads (GET /api/v1/..., the watch stream,
	// the web UI's pages) to anyone who reaches flotilla, without a
	// token; the controls still need one. Insecure: the rollouts, the
	// applications and the clusters' names are then public. Default false.
	AnonymousRead bool `json:"anonymousRead"`
	// TrustedProxies are the reverse proxies (CIDRs or IP addresses) in
	// front of flotilla whose X-Forwarded-For the audit believes: a
	// control from one of them is recorded as coming from the header's
	// last hop that is not one of them (what the client sent in the
	// header comes before it and is not believed); from anyone else, as
	// coming from its peer address (the header is ignored). Default none.
	TrustedProxies []string `json:"trustedProxies"`
	// SSO, when set, logs people in through an OpenID Connect provider:
	// the web UI (code flow with PKCE) and the CLI (`flotilla login
	// --sso`, device flow). Unset: API tokens only.
	SSO *SSO `json:"sso"`
	// SessionSweepInterval is how often the web sessions that ended or
	// expired (single sign-on's, and those of created API tokens, also
	// once their token is revoked) are deleted from the state, on one
	// replica; their cookies are refused before that already. 1s to 24h.
	// Default 10m.
	SessionSweepInterval Duration `json:"sessionSweepInterval"`
	// Bus, when set, runs flotilla in scale-out mode: its events, rollout
	// state and the sharing of work among several active replicas live in
	// a NATS JetStream cluster. Unset: embedded mode (one process, all
	// state under DataDir).
	Bus *Bus `json:"bus"`
	// FleetRollouts, when set, keeps a FleetRollout custom resource per
	// rollout in a namespace of the management cluster (in either mode):
	// `kubectl get fleetrollouts -w` follows the fleet.
	FleetRollouts *FleetRollouts `json:"fleetRollouts"`
	// Resources, when set, adds the applications of the Application
	// custom resources (flotilla.dev/v1alpha1) of the management cluster
	// to the file's, watched live (pkg/resources): each validated with
	// the file as one configuration and swapped in as a reload of the
	// file is; its status says whether flotilla took it, and why not.
	Resources *Resources `json:"resources"`
}

// Resources is where flotilla watches Application resources. The CRD is
// deploy/chart/flotilla/crds/applications.yaml, which the chart installs.
type Resources struct {
	// Namespaces watched (the teams' namespaces); empty: every namespace.
	Namespaces []string `json:"namespaces"`
	// PlatformNamespaces are the platform team's namespaces: the Cluster
	// resources (flotilla.dev/v1alpha1, the CRD
	// deploy/chart/flotilla/crds/clusters.yaml) of these namespaces are
	// clusters of the fleet, beside the file's fleet.clusters, their
	// kubeconfig read from a Secret of their namespace; a Cluster resource
	// of another watched namespace is not Ready (NotPlatformNamespace) and
	// changes nothing. The oldest WavePolicy resource of these namespaces
	// (deploy/chart/flotilla/crds/wavepolicies.yaml) replaces fleet.waves,
	// fleet.wavePolicy and fleet.freezeWindows while it is in force.
	// Empty: no Cluster or WavePolicy resource is read.
	PlatformNamespaces []string `json:"platformNamespaces"`
	// Kubeconfig of the management cluster; empty: the pod's own
	// (in-cluster) credentials.
	Kubeconfig string `json:"kubeconfig"`
}

// FleetRollouts is where the FleetRollout resources go. The CRD is
// deploy/chart/flotilla/crds/fleetrollouts.yaml, which the chart installs.
type FleetRollouts struct {
	// Namespace of the resources. Required.
	Namespace string `json:"namespace"`
	// Kubeconfig of the management cluster; empty: the pod's own
	// (in-cluster) credentials.
	Kubeconfig string `json:"kubeconfig"`
}

// Bus is the NATS JetStream cluster of scale-out mode.
type Bus struct {
	// URL lists the NATS servers: comma-separated nats:// or tls:// URLs.
	// Required.
	URL string `json:"url"`
	// CredentialsFile is a NATS credentials file (a user's JWT and nkey
	// seed, as `nsc` writes it; mounted from a Secret). Optional.
	CredentialsFile string `json:"credentialsFile"`
	// TLS: a CA file to verify the servers, and a client certificate and
	// key for mutual TLS. Optional.
	TLS *BusTLS `json:"tls"`
	// Stream names the JetStream stream and prefixes the KV buckets.
	// Letters, digits, '-' and '_'. Default "FLOTILLA".
	Stream string `json:"stream"`
	// Replicas of the stream and the buckets: 1, 3 or 5. Default 3 (one
	// NATS node may be lost).
	Replicas int `json:"replicas"`
	// Partitions the work is shared in, each handled by one replica at a
	// time: 1-1024, more than the replicas; fixed for the stream's life.
	// Default 16.
	Partitions int `json:"partitions"`
	// Replica names this replica among the live ones (unique). Default
	// $POD_NAME, else the host name.
	Replica string `json:"replica"`
}

// BusTLS are the TLS files of the NATS connection.
type BusTLS struct {
	// CAFile verifies the servers' certificates (default: the system's).
	CAFile string `json:"caFile"`
	// CertFile and KeyFile are the client's certificate and key, both or
	// neither.
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
}

// APIToken is one named API token.
type APIToken struct {
	// Name is who the token's holder is recorded as: a DNS label, unique.
	Name string `json:"name"`
	// Secret is where the token comes from (env or file). Required.
	Secret *Secret `json:"secret"`
	// Value is the resolved secret, set by Load. Never marshalled.
	Value string `json:"-"`
	// Groups the token's holder is in, which projects' roles and
	// rbac.policy grant to as group:<name>. Needs projects or rbac.
	Groups []string `json:"groups"`
	// Automation marks a token a machine uses (CI, a bot): its approval of
	// a wave never counts (waves[].approvals). server.apiToken ("default")
	// is automation always. Default false: a person's token.
	Automation bool `json:"automation"`
}

// DefaultTokenName is the name server.apiToken is recorded as.
const DefaultTokenName = "default"

// AuthNotice says what is insecure or refused about the API's
// authentication, "" when nothing is: no API token and closed reads refuse
// everything; anonymousRead opens the reads to anyone.
func (s Server) AuthNotice() string {
	switch {
	case s.AnonymousRead:
		return "server.anonymousRead is on: anyone who reaches flotilla reads its API and web UI without a token (insecure)"
	case len(s.Tokens()) == 0 && s.SSO == nil:
		return "no API token is set: every API call and web UI page is refused (401); set server.apiTokens (or server.apiToken)"
	}
	return ""
}

// AutomationTokens names the API tokens of machines, whose approvals never
// count: "default" (server.apiToken, when set) and those marked
// automation.
func (s Server) AutomationTokens() []string {
	var out []string
	if s.APITokenValue != "" || s.APIToken != nil {
		out = append(out, DefaultTokenName)
	}
	for _, t := range s.APITokens {
		if t.Automation {
			out = append(out, t.Name)
		}
	}
	return out
}

// Tokens returns every API token by name: apiToken as "default", then the
// named ones.
func (s Server) Tokens() map[string]string {
	out := map[string]string{}
	if s.APITokenValue != "" {
		out[DefaultTokenName] = s.APITokenValue
	}
	for _, t := range s.APITokens {
		if t.Value != "" {
			out[t.Name] = t.Value
		}
	}
	return out
}

// Events configures where CloudEvents go besides flotilla's own functions.
type Events struct {
	// Sink is an optional http(s) URL to which every CloudEvent is mirrored.
	Sink string `json:"sink"`
	// CDEvents are http(s) URLs to which flotilla posts the CDEvents (spec
	// v0.5, as CloudEvents) of what it does: artifact.published,
	// service.deployed/upgraded/rolledback per cluster, pipelinerun.queued
	// and finished; each sink in order, nothing lost.
	CDEvents []string `json:"cdevents"`
}

// Receiver is one inbound webhook endpoint, served at POST /hooks/<name>
// (and at POST /hooks/<name>/<secret> for senders that cannot sign or send a
// header: dockerhub, quay, flagger, tekton). The first receiver of type
// cloudevents is also served at POST /events.
type Receiver struct {
	// Name is a DNS label ([a-z0-9-], at most 63), unique among receivers.
	Name string `json:"name"`
	// Type is the sender: one of ReceiverTypes.
	Type string `json:"type"`
	// Secret authenticates the sender: the HMAC key, shared token or path
	// token, depending on the type. Required unless Insecure, except for gar
	// receivers, which authenticate with OIDC.
	Secret *Secret `json:"secret"`
	// Header names the request header that carries the secret, for senders
	// that send a configured static header (distribution, harbor, acr, ecr,
	// cloudevents). Default "Authorization", which accepts the secret
	// verbatim, as "Bearer <secret>" or as Basic "user:password" credentials.
	Header string `json:"header"`
	// Registry is the registry host ("host[:port]") for senders whose
	// payloads do not name it. Required for nexus.
	Registry string `json:"registry"`
	// OIDC authenticates gar receivers (Pub/Sub push with OIDC tokens).
	OIDC *OIDC `json:"oidc"`
	// RateLimit bounds the deliveries the receiver accepts; more are
	// answered 429 with Retry-After. Default (nil): the intake's, 500 per
	// second with a burst of 1000.
	RateLimit *RateLimit `json:"rateLimit"`
	// Insecure accepts unauthenticated requests; it excludes Secret and OIDC.
	Insecure bool `json:"insecure"`
	// SecretValue is the resolved secret, set by Load. Never marshalled.
	SecretValue string `json:"-"`
}

// OIDC says which OIDC bearer tokens authenticate a receiver's deliveries.
type OIDC struct {
	// Audience must be among the token's audiences: the audience set on the
	// Pub/Sub push subscription. Required.
	Audience string `json:"audience"`
	// Issuer must equal the token's issuer. Default
	// "https://accounts.google.com".
	Issuer string `json:"issuer"`
	// ServiceAccount, when set, must be the token's verified email: the
	// service account the subscription pushes as.
	ServiceAccount string `json:"serviceAccount"`
	// JWKSURL serves the issuer's signing keys. Default Google's,
	// "https://www.googleapis.com/oauth2/v3/certs". Excludes JWKSFile.
	JWKSURL string `json:"jwksURL"`
	// JWKSFile holds the signing keys as a JWKS document, for installations
	// that cannot reach JWKSURL. Relative paths resolve against the config
	// file's directory.
	JWKSFile string `json:"jwksFile"`
}

// RateLimit is a token bucket.
type RateLimit struct {
	// PerSecond is the sustained rate, > 0.
	PerSecond float64 `json:"perSecond"`
	// Burst is how many deliveries may arrive at once, >= 1. Default
	// twice PerSecond, at least 1.
	Burst int `json:"burst"`
}

// Receiver types: every sender flotilla reads. README has a table of how to
// configure each one.
const (
	ReceiverDockerHub       = "dockerhub"        // Docker Hub repository webhooks (path token)
	ReceiverHarbor          = "harbor"           // Harbor webhooks, Default or CloudEvents format (header)
	ReceiverDistribution    = "distribution"     // CNCF distribution registry notifications (header)
	ReceiverQuay            = "quay"             // Quay repo_push notifications (path token)
	ReceiverACR             = "acr"              // Azure Container Registry webhooks (header)
	ReceiverGAR             = "gar"              // Artifact Registry / GCR through Pub/Sub push (OIDC)
	ReceiverECR             = "ecr"              // AWS ECR through an EventBridge API destination (header)
	ReceiverArtifactory     = "artifactory"      // JFrog Artifactory docker webhooks (HMAC-SHA256)
	ReceiverNexus           = "nexus"            // Nexus Repository 3 component webhooks (HMAC-SHA1)
	ReceiverGitHub          = "github"           // GitHub push and package (GHCR) events (HMAC-SHA256)
	ReceiverGitLab          = "gitlab"           // GitLab Push Hook and Tag Push Hook (token header)
	ReceiverGitea           = "gitea"            // Gitea push webhooks (HMAC-SHA256)
	ReceiverForgejo         = "forgejo"          // Forgejo push webhooks (HMAC-SHA256)
	ReceiverBitbucket       = "bitbucket"        // Bitbucket Cloud repo:push (HMAC-SHA256)
	ReceiverBitbucketServer = "bitbucket-server" // Bitbucket Server / Data Center repo:refs_changed (HMAC-SHA256)
	ReceiverFlagger         = "flagger"          // Flagger's canary event webhook (path token)
	ReceiverTekton          = "tekton"           // Tekton Pipelines' CloudEvents (path token)
	ReceiverCloudEvents     = "cloudevents"      // native CloudEvents, binary/structured/batch (bearer token)
)

// ReceiverTypes lists the receiver types a config may name.
var ReceiverTypes = []string{
	ReceiverDockerHub, ReceiverHarbor, ReceiverDistribution, ReceiverQuay, ReceiverACR, ReceiverGAR,
	ReceiverECR, ReceiverArtifactory, ReceiverNexus, ReceiverGitHub, ReceiverGitLab, ReceiverGitea,
	ReceiverForgejo, ReceiverBitbucket, ReceiverBitbucketServer, ReceiverFlagger, ReceiverTekton,
	ReceiverCloudEvents,
}

// ImageReceiverTypes are the receiver types whose senders report image
// pushes (GitHub's package events carry GHCR's): what KubeCD's image
// triggers fire on, as no poll covers them.
var ImageReceiverTypes = []string{
	ReceiverDockerHub, ReceiverHarbor, ReceiverDistribution, ReceiverQuay, ReceiverACR, ReceiverGAR,
	ReceiverECR, ReceiverArtifactory, ReceiverNexus, ReceiverGitHub, ReceiverCloudEvents,
}

// headerReceivers are the receiver types whose sender sends a configured
// static header, so Header may name it.
var headerReceivers = []string{ReceiverDistribution, ReceiverHarbor, ReceiverACR, ReceiverECR, ReceiverCloudEvents}

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
	// Tekton says where the tekton executor runs its PipelineRuns.
	// Required with executor tekton.
	Tekton *TektonExecutor `json:"tekton"`
	// Clusters are the fleet's clusters; at least one.
	Clusters []Cluster `json:"clusters"`
	// Waves are rolled out one after another; every cluster is in exactly
	// one wave.
	Waves []Wave `json:"waves"`
	// WavePolicy is every wave's policy, unless the wave sets its own.
	WavePolicy WavePolicy `json:"wavePolicy"`
	// FreezeWindows hold every rollout: a wave does not start inside one
	// (it waits for the window's end, or an override).
	FreezeWindows []FreezeWindow `json:"freezeWindows"`
	// MetricsServer is the Prometheus the clusters' Flaggers query (their
	// -metrics-server): custom metrics of type prometheus and Kanary
	// promQL validations without an address of their own query it, and
	// `flotilla fleet bootstrap` starts Flagger with it. An http(s) URL;
	// default DefaultMetricsServer, Flagger's own default.
	MetricsServer string `json:"metricsServer"`
	// Poll is how every image application's registry is polled, behind
	// its webhooks (an application's poll overrides it).
	Poll Poll `json:"poll"`
	// Reconcile is how often each application's clusters are compared
	// with its validated digest: a cluster that entered its waves or came
	// back empty is caught up, a primary changed by hand is drift
	// (pkg/reconcile).
	Reconcile Reconcile `json:"reconcile"`
	// Discovery adds the clusters an inventory keeps to Clusters, live
	// (pkg/discovery); none when nil.
	Discovery *Discovery `json:"discovery"`
}

// Discovery names where clusters are discovered, beside the file's own.
type Discovery struct {
	// ArgoCD discovers Argo CD's cluster Secrets.
	ArgoCD *ArgoCDDiscovery `json:"argocd"`
	// ClusterProfiles discovers the sig-multicluster ClusterProfiles
	// (multicluster.x-k8s.io/v1alpha1) of a cluster inventory.
	ClusterProfiles *ClusterProfileDiscovery `json:"clusterProfiles"`
	// ClusterAPI discovers the clusters Cluster API manages, from their
	// kubeconfig Secrets.
	ClusterAPI *ClusterAPIDiscovery `json:"clusterAPI"`
}

// ClusterAPIDiscovery reads the clusters Cluster API manages in the
// management cluster: each Cluster (cluster.x-k8s.io/v1beta1) is a
// cluster of the fleet named after it, labelled with its labels, reached
// with the kubeconfig of its Secret <cluster>-kubeconfig (type
// cluster.x-k8s.io/secret, data key value). One without that Secret yet,
// or being deleted, is left out.
type ClusterAPIDiscovery struct {
	// Namespaces of the Clusters and their Secrets; empty: every
	// namespace.
	Namespaces []string `json:"namespaces"`
	// Selector is a label selector the Clusters must match (as kubectl's
	// -l), "" for all.
	Selector string `json:"selector"`
	// Kubeconfig of the management cluster; empty: the pod's own
	// (in-cluster) credentials.
	Kubeconfig string `json:"kubeconfig"`
}

// ClusterProfileDiscovery reads the ClusterProfiles (KEP-4322,
// multicluster.x-k8s.io/v1alpha1) of the management cluster: each is a
// cluster of the fleet named after the ClusterProfile, labelled with its
// labels, reached at the server and CA of the first of its
// status.accessProviders that Providers names, with the credentials that
// provider's exec plugin gives (sigs.k8s.io/cluster-inventory-api's
// pkg/access model). One whose ControlPlaneHealthy condition is False is
// left out.
type ClusterProfileDiscovery struct {
	// Namespaces whose ClusterProfiles are read; empty: every namespace.
	Namespaces []string `json:"namespaces"`
	// Selector is a label selector the ClusterProfiles must match (as
	// kubectl's -l), "" for all.
	Selector string `json:"selector"`
	// Kubeconfig of the management cluster; empty: the pod's own
	// (in-cluster) credentials.
	Kubeconfig string `json:"kubeconfig"`
	// Providers map an access provider's name, as ClusterProfiles list
	// them in status.accessProviders, to the exec plugin that gives its
	// credentials, in order of preference (the upstream provider file's
	// providers). At least one.
	Providers []AccessProvider `json:"providers"`
}

// AccessProvider is one provider of the cluster-inventory-api's provider
// file: a name and the exec plugin that gives credentials for clusters
// listed with it.
type AccessProvider struct {
	// Name of the access provider, as in a ClusterProfile's
	// status.accessProviders[].name.
	Name string `json:"name"`
	// ExecConfig is the credential plugin run for a cluster (client-go's
	// exec credential plugin: command, args, env, apiVersion).
	ExecConfig ExecConfig `json:"execConfig"`
	// ProfileSourcedCLIArgsPolicy says what to do with the arguments a
	// ClusterProfile adds in its cluster extension
	// clusterprofiles.multicluster.x-k8s.io/exec/additional-args: Append
	// them, or Ignore them (default).
	ProfileSourcedCLIArgsPolicy string `json:"profileSourcedCLIArgsPolicy"`
	// ProfileSourcedEnvVarsPolicy says what to do with the environment a
	// ClusterProfile adds in its cluster extension
	// clusterprofiles.multicluster.x-k8s.io/exec/additional-envs:
	// AppendIfNotExists (the plugin's own win), Replace (the
	// ClusterProfile's win), or Ignore them (default).
	ProfileSourcedEnvVarsPolicy string `json:"profileSourcedEnvVarsPolicy"`
}

// ExecConfig is a client-go exec credential plugin, as a kubeconfig's
// users[].user.exec.
type ExecConfig struct {
	// APIVersion of the ExecCredential the plugin prints. Default
	// client.authentication.k8s.io/v1.
	APIVersion string `json:"apiVersion"`
	// Command run (a path, or a name looked up in PATH). Required.
	Command string `json:"command"`
	// Args of the command.
	Args []string `json:"args"`
	// Env added to the command's environment.
	Env []ExecEnvVar `json:"env"`
	// ProvideClusterInfo passes the cluster (server, CA, and the
	// ClusterProfile's client.authentication.k8s.io/exec extension) to
	// the plugin in KUBERNETES_EXEC_INFO.
	ProvideClusterInfo bool `json:"provideClusterInfo"`
	// InstallHint is shown when the command is not found.
	InstallHint string `json:"installHint"`
}

// ExecEnvVar is one variable of an exec plugin's environment.
type ExecEnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// DefaultArgoCDNamespace is fleet.discovery.argocd.namespace's default,
// where Argo CD keeps its cluster Secrets.
const DefaultArgoCDNamespace = "argocd"

// ArgoCDDiscovery reads Argo CD's declarative cluster Secrets (label
// argocd.argoproj.io/secret-type: cluster) of a namespace of the
// management cluster: each is a cluster of the fleet, named after its
// data.name, reached at data.server with data.config's credentials,
// labelled with the Secret's labels (which the waves' selectors read).
type ArgoCDDiscovery struct {
	// Namespace of the Secrets. Default "argocd".
	Namespace string `json:"namespace"`
	// Selector is a label selector the Secrets must match too (as
	// kubectl's -l), "" for every cluster Secret of the namespace.
	Selector string `json:"selector"`
	// Kubeconfig of the management cluster; empty: the pod's own
	// (in-cluster) credentials.
	Kubeconfig string `json:"kubeconfig"`
}

// Reconcile is the check of what the clusters run against what the fleet
// validated (pkg/reconcile): catch-up and drift.
type Reconcile struct {
	// Interval between two checks of an application's clusters (also
	// made, where cheap, when the clusters' watch caches see a primary
	// change); "0s" turns catch-up and drift detection off. Default
	// DefaultReconcileInterval.
	Interval *Duration `json:"interval"`
}

// ReconcileInterval is how often the applications' clusters are checked
// (fleet.reconcile.interval), 0 when they are not.
func (c *Config) ReconcileInterval() time.Duration {
	if c.Fleet.Reconcile.Interval == nil {
		return DefaultReconcileInterval
	}
	return c.Fleet.Reconcile.Interval.Duration
}

// Poll is the safety net behind the webhooks: flotilla lists an
// application's tags (a git application's branch head) every Interval
// (jittered, backing off while the registry fails) and feeds a newer
// version than the webhooks brought into the same path as a push
// (pkg/poll).
type Poll struct {
	// Interval between two polls of an application; "0s" turns polling
	// off. Default DefaultRegistryPoll for the fleet; an application's
	// default is the fleet's.
	Interval *Duration `json:"interval"`
	// Disabled turns polling off (the fleet's: every application's, unless
	// an application sets its own interval).
	Disabled bool `json:"disabled"`
}

// PollInterval is how often app's registry (or branch) is polled, 0 when
// it is not: polling disabled or 0s for the application, else for the
// fleet.
func (c *Config) PollInterval(app Application) time.Duration {
	if p := app.Poll; p != nil {
		if p.Disabled {
			return 0
		}
		if p.Interval != nil {
			return p.Interval.Duration
		}
	}
	if c.Fleet.Poll.Disabled || c.Fleet.Poll.Interval == nil {
		return 0
	}
	return c.Fleet.Poll.Interval.Duration
}

// FreezeWindow is a recurring stretch of time in which no wave starts:
// from each start of Schedule (cron, five fields or a descriptor such as
// @weekly) or RRule (RFC 5545: "FREQ=WEEKLY;BYDAY=SA", with DTSTART or
// not), exactly one of them, for Duration, in TimeZone.
type FreezeWindow struct {
	// Name is a DNS label, unique in its list; rollouts name it while
	// they wait.
	Name     string   `json:"name"`
	Schedule string   `json:"schedule"`
	RRule    string   `json:"rrule"`
	Duration Duration `json:"duration"`
	// TimeZone is an IANA time zone, such as "America/New_York".
	// Default UTC.
	TimeZone string `json:"timeZone"`
}

// Window compiles the window.
func (w FreezeWindow) Window() (freeze.Window, error) {
	return freeze.New(w.Name, w.Schedule, w.RRule, w.Duration.Duration, w.TimeZone)
}

// WavePolicy bounds how a wave runs.
type WavePolicy struct {
	// MaxParallel is how many clusters of the wave roll out at a time: a
	// count, or a percentage of the wave's clusters ("25%", rounded up,
	// at least 1). Default "100%": the whole wave at once.
	MaxParallel *intstr.IntOrString `json:"maxParallel"`
	// MaxFailures is the wave's failure budget: how many of its clusters
	// may fail while the wave still succeeds, a count or a percentage
	// ("10%", rounded down). The failed clusters stay as Flagger left them
	// (on the previous version), are listed, and are reverted with the
	// rest if the rollout fails later. Default 0.
	MaxFailures *intstr.IntOrString `json:"maxFailures"`
	// BakeTime is how long the wave must stay healthy after its last
	// cluster succeeded (no canary of it failing) before the next wave
	// starts; a failure during the bake fails the wave. RequiredSoakTime
	// (Kargo's name) is an alias: set one of them. Default 0.
	BakeTime         *Duration `json:"bakeTime"`
	RequiredSoakTime *Duration `json:"requiredSoakTime"`
	// Approvals is who must approve the wave ('flotilla approve ROLLOUT
	// --wave W') before its clusters start: a number of distinct people
	// (any principal that is not automation), or {required, from,
	// separationOfDuties} (Approvals). Default 0: none.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Approvals *Approvals `json:"approvals"`
	// RequireSignature: the wave takes only images whose signature an
	// application's verify.signatures trusts. Default true; false lets an
	// early wave run unsigned builds. Applications without signatures are
	// not concerned.
	RequireSignature *bool `json:"requireSignature"`
}

// SignatureRequired tells whether the policy requires signed images.
func (p WavePolicy) SignatureRequired() bool { return p.RequireSignature == nil || *p.RequireSignature }

// Approvers returns how many approvals the policy asks for.
func (p WavePolicy) Approvers() int {
	if p.Approvals == nil {
		return 0
	}
	return p.Approvals.Required
}

// Bake returns the policy's bake time.
func (p WavePolicy) Bake() time.Duration {
	switch {
	case p.BakeTime != nil:
		return p.BakeTime.Duration
	case p.RequiredSoakTime != nil:
		return p.RequiredSoakTime.Duration
	}
	return 0
}

// Executors.
const (
	ExecutorEmbedded = "embedded" // pipelines run inside flotilla's process
	ExecutorTekton   = "tekton"   // PipelineRuns of flotilla-rollout on a Tekton cluster
)

// Executors lists the executors a config may name.
var Executors = []string{ExecutorEmbedded, ExecutorTekton}

// TektonExecutor is the cluster that runs flotilla's pipelines on Tekton
// (install them with `flotilla pipelines install`).
type TektonExecutor struct {
	// Cluster names the fleet cluster running Tekton; or set Kubeconfig
	// (and Context) for a cluster outside the fleet. Exactly one.
	Cluster    string `json:"cluster"`
	Kubeconfig string `json:"kubeconfig"`
	Context    string `json:"context"`
	// Namespace runs the PipelineRuns and holds the kubeconfig Secrets of
	// the target clusters and the git credentials. Default "flotilla".
	Namespace string `json:"namespace"`
	// ServiceAccount runs the PipelineRuns. Default: Tekton's default.
	ServiceAccount string `json:"serviceAccount"`
	// Labels are put on every PipelineRun, and Tekton passes them on to its
	// TaskRuns and their pods (for policies, quotas, cost reports, ...).
	// flotilla's own labels (flotilla.dev/*) take precedence. Default: none.
	Labels map[string]string `json:"labels"`
	// PodTemplate is Tekton's pod template for every TaskRun of the
	// PipelineRuns (their spec.taskRunTemplate.podTemplate): where the
	// steps' pods run and how (nodeSelector, tolerations, affinity,
	// securityContext, imagePullSecrets, priorityClassName, ...). Default:
	// none, Tekton's defaults.
	PodTemplate *pod.Template `json:"podTemplate"`
	// ManageSecrets has flotilla write each target cluster's kubeconfig
	// into a Secret flotilla-kubeconfig-<cluster> before its first run.
	// Default true; false when the Secrets are provisioned otherwise.
	ManageSecrets *bool `json:"manageSecrets"`
}

// GitOps says where an application's image lives in a deployments git
// repository (KubeCD): a rollout commits the new image there, naming the
// rollout and version, before applying the canary, and a rollback commits
// the previous image back.
type GitOps struct {
	// URL of the repository: https://, ssh:// (or git@host:path), file:// or
	// a local path. Required.
	URL string `json:"url"`
	// Branch to commit to. Default: the repository's default branch.
	Branch string `json:"branch"`
	// Paths are the files holding the image, relative to the repository's
	// root. "{cluster}" is replaced by the cluster's name, so each cluster
	// may have its own overlay. At least one.
	Paths []string `json:"paths"`
	// Edit is how the files hold the image: kustomize (an images: entry),
	// helm (values) or manifest (containers of plain manifests). Default
	// kustomize.
	Edit string `json:"edit"`
	// Options are the edit's fields: for kustomize name, newName; for helm
	// prefix, repoValue, tagValue, prefixValue, digestValue; for manifest
	// container; tagOnly for all (see pkg/gitops).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Options map[string]any `json:"options"`
	// Username and Password (or Token) authenticate over HTTPS; SSHKeyFile
	// over SSH. For the tekton executor, the Secret named Secret (default
	// flotilla-git) in its namespace holds them instead.
	Username   string  `json:"username"`
	Password   *Secret `json:"password"`
	Token      *Secret `json:"token"`
	SSHKeyFile string  `json:"sshKeyFile"`
	Secret     string  `json:"secret"`
	// PasswordValue and TokenValue are resolved by Load. Never marshalled.
	PasswordValue string `json:"-"`
	TokenValue    string `json:"-"`
	// Mode is how a rollout writes the image: commit (the default) pushes
	// a commit to Branch before each cluster's canary; pullRequest pushes
	// one branch per wave, with every cluster file of the wave, opens a
	// pull request into Branch, and starts the wave's clusters once it is
	// merged (KubeCD's way). Closing it unmerged, or leaving it open past
	// its merge deadline, aborts the rollout.
	Mode string `json:"mode"`
	// PullRequest is the host and the pull requests' settings, for mode
	// pullRequest (required there, refused otherwise).
	PullRequest *PullRequest `json:"pullRequest"`
}

// PullRequest configures the pull requests of a GitOps application in mode
// pullRequest.
type PullRequest struct {
	// Host is the git host's kind: github, gitlab, gitea or forgejo.
	// Required.
	Host string `json:"host"`
	// APIURL is the host's API. Default: github https://api.github.com/;
	// gitlab https://<the url's host>/api/v4; gitea and forgejo
	// https://<the url's host>.
	APIURL string `json:"apiURL"`
	// Repository is "owner/name" on the host (GitLab: the project's full
	// path). Default: the url's path without ".git".
	Repository string `json:"repository"`
	// Token is the API token. Default: gitops.token.
	Token *Secret `json:"token"`
	// AutoMerge asks the host to merge each pull request as soon as it may
	// (its required checks passed), where the host supports it. Default
	// false: a human merges.
	AutoMerge bool `json:"autoMerge"`
	// MergeMethod is how an automatic merge merges: merge, squash or
	// rebase. Default merge.
	MergeMethod string `json:"mergeMethod"`
	// Labels are put on every pull request; Reviewers (user names) are
	// asked for a review. At most 20 each.
	Labels    []string `json:"labels"`
	Reviewers []string `json:"reviewers"`
	// MergeDeadline is how long a wave waits for its pull request to be
	// merged before the rollout is aborted. Default 24h; 1m to 720h.
	MergeDeadline *Duration `json:"mergeDeadline"`
	// PollInterval is how often flotilla reads an open pull request, for
	// hosts whose webhooks do not reach it. Default 2m; 10s up to the
	// merge deadline.
	PollInterval *Duration `json:"pollInterval"`
	// MergeRetryFor is how long flotilla asks the host again (with
	// back-off from 2s to 30s) after it answers a merge (autoMerge, a
	// revert) with an error; past it the wave waits for `flotilla retry`.
	// Default 5m; 0s (never again) up to the merge deadline.
	MergeRetryFor *Duration `json:"mergeRetryFor"`
	// Revert is how a rollback writes the previous images: pullRequest (a
	// pull request merged automatically where the host can) or commit
	// (pushed to Branch). Default pullRequest. The live revert of each
	// cluster does not wait for it.
	Revert string `json:"revert"`
	// TokenValue is resolved by Load. Never marshalled.
	TokenValue string `json:"-"`
}

// Source is where an application's versions come from when it is not an
// image repository.
type Source struct {
	// Git is a deployments repository (KubeCD's environments and releases):
	// a push changing a tracked path on the branch, or a tag matching Tags,
	// rolls out that commit's rendered manifests through the waves.
	// Required.
	Git *GitSource `json:"git"`
}

// GitSource is a git repository an application's manifests are rendered
// from.
type GitSource struct {
	// URL of the repository: https://, ssh:// (or git@host:path), file:// or
	// a local path. Pushes are matched to it by host and path (scheme,
	// credentials, ".git" and a trailing "/" aside). Required.
	URL string `json:"url"`
	// Branch whose pushes roll out. Default "main".
	Branch string `json:"branch"`
	// Tags, when set, is a Go regular expression matched against the whole
	// name of a pushed tag: pushes of those tags roll out too (of the
	// commit they name).
	Tags string `json:"tags"`
	// Paths are what each cluster applies, relative to the repository's
	// root: files or directories of manifests (render manifests), or
	// kustomization directories (render kustomize). "{cluster}" is
	// replaced by the cluster's name. A push changing none of them (nor,
	// for helm, the chart or a values file) is ignored, saying so.
	// Required unless Render is helm.
	Paths []string `json:"paths"`
	// Render is how the paths become objects: manifests (YAML files, the
	// default), kustomize (kustomize build, built in) or helm (Helm's
	// template, built in).
	Render string `json:"render"`
	// Helm is the chart and its values, for render helm (KubeCD's release
	// fields).
	Helm *HelmRelease `json:"helm"`
	// AllowedImages, when set, are Go regular expressions, each matched
	// against the whole repository of every container image the rendered
	// objects run ("registry/path", as go-containerregistry names it:
	// Docker Hub's "nginx" is "index.docker.io/library/nginx"): a commit
	// rendering any other image fails in each cluster before anything is
	// applied there. Default: any image.
	AllowedImages []string `json:"allowedImages"`
	// Prune, true by default, deletes from a cluster the objects an
	// earlier commit applied there and the rolled-out one no longer
	// renders, after the cluster succeeded (a revert: at once); false
	// leaves them in the cluster, no longer recorded in its inventory.
	Prune *bool `json:"prune"`
	// Username and Password (or Token) authenticate over HTTPS; SSHKeyFile
	// over SSH. For the tekton executor, the Secret named Secret (default
	// flotilla-git) in its namespace holds them instead.
	Username   string  `json:"username"`
	Password   *Secret `json:"password"`
	Token      *Secret `json:"token"`
	SSHKeyFile string  `json:"sshKeyFile"`
	Secret     string  `json:"secret"`
	// PasswordValue and TokenValue are resolved by Load. Never marshalled.
	PasswordValue string `json:"-"`
	TokenValue    string `json:"-"`
	// KubeCD is the release of KubeCD's files an application of
	// Config.KubeCD renders (render kubecd). Never marshalled.
	KubeCD *KubeCDSource `json:"-"`
}

// HelmRelease is a chart in the repository and its values, as KubeCD's
// releases give them. Values merge in this order, later ones winning: the
// chart's, DefaultValues, ValuesFile, Values.
type HelmRelease struct {
	// Chart is the chart's directory in the repository. Required.
	Chart string `json:"chart"`
	// DefaultValues are values files shared by every release of the
	// cluster ("{cluster}" replaced): KubeCD's environment defaults.
	DefaultValues []string `json:"defaultValues"`
	// ValuesFile is the release's values file ("{cluster}" replaced).
	ValuesFile string `json:"valuesFile"`
	// Values override the files.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Values map[string]any `json:"values"`
	// ReleaseName is the Helm release name templates see. Default the
	// application's name.
	ReleaseName string `json:"releaseName"`
}

// GitRenders lists the values of GitSource.Render.
var GitRenders = []string{"manifests", "kustomize", "helm"}

// Defaults of a git source.
const (
	DefaultGitBranch = "main"
	DefaultGitRender = "manifests"
)

// Git returns the application's git source, nil for an image application.
func (a Application) Git() *GitSource {
	if a.Source == nil {
		return nil
	}
	return a.Source.Git
}

// Prunes tells whether the objects a commit no longer renders are deleted
// (Prune, default true).
func (g GitSource) Prunes() bool { return g.Prune == nil || *g.Prune }

// TagMatches reports whether pushes of tag roll out (Tags matches it in
// full).
func (g GitSource) TagMatches(tag string) bool {
	if g.Tags == "" {
		return false
	}
	re, err := regexp.Compile(`^(?:` + g.Tags + `)$`)
	return err == nil && re.MatchString(tag)
}

// TrackedPaths are the paths of the repository cluster takes its objects
// from: Paths, and for helm the chart and the values files, "{cluster}"
// replaced.
func (g GitSource) TrackedPaths(cluster string) []string {
	if k := g.KubeCD; k != nil {
		return slices.Clone(k.Tracked[cluster])
	}
	ps := slices.Clone(g.Paths)
	if h := g.Helm; h != nil {
		ps = append(ps, h.Chart)
		ps = append(ps, h.DefaultValues...)
		if h.ValuesFile != "" {
			ps = append(ps, h.ValuesFile)
		}
	}
	for i, p := range ps {
		ps[i] = strings.ReplaceAll(p, "{cluster}", cluster)
	}
	return ps
}

// GitOpsEdits lists the values of GitOps.Edit.
var GitOpsEdits = []string{"kustomize", "helm", "manifest"}

// GitOps modes: GitOps.Mode's values.
const (
	GitOpsModeCommit      = "commit"
	GitOpsModePullRequest = "pullRequest"
)

// GitOpsModes lists the values of GitOps.Mode.
var GitOpsModes = []string{GitOpsModeCommit, GitOpsModePullRequest}

// PullRequestHosts lists the values of PullRequest.Host (the hosts
// pkg/gitops/pullrequest has a client for).
var PullRequestHosts = []string{"github", "gitlab", "gitea", "forgejo"}

// MergeMethods lists the values of PullRequest.MergeMethod.
var MergeMethods = []string{"merge", "squash", "rebase"}

// PullRequestReverts lists the values of PullRequest.Revert.
var PullRequestReverts = []string{GitOpsModePullRequest, GitOpsModeCommit}

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
	// Source says where a discovered cluster comes from (fleet.discovery:
	// "fleet.discovery.argocd: Secret argocd/prod-eu"), what its problems
	// are reported at; "" for the file's own. Never in the file.
	Source string `json:"-"`
	// KubeconfigData is a discovered cluster's kubeconfig, made from its
	// source, in place of Kubeconfig. Never in the file.
	KubeconfigData []byte `json:"-"`
}

// Wave is a group of clusters rolled out together.
type Wave struct {
	// Name is a DNS label, unique among waves. Default "wave-<n>", n 1-based.
	Name string `json:"name"`
	// Clusters names clusters of the fleet.
	Clusters []string `json:"clusters"`
	// Selector adds the clusters whose labels it matches (matchLabels,
	// matchExpressions) and that no earlier wave has. A wave needs
	// clusters or a selector, and must end up with a cluster.
	Selector *metav1.LabelSelector `json:"selector"`
	// MaxParallel, MaxFailures and BakeTime (or RequiredSoakTime)
	// override fleet.wavePolicy's for this wave.
	MaxParallel      *intstr.IntOrString `json:"maxParallel"`
	MaxFailures      *intstr.IntOrString `json:"maxFailures"`
	BakeTime         *Duration           `json:"bakeTime"`
	RequiredSoakTime *Duration           `json:"requiredSoakTime"`
	// Approvals: a number, or {required, from, separationOfDuties}.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Approvals        *Approvals `json:"approvals"`
	RequireSignature *bool      `json:"requireSignature"`
	// FreezeWindows hold this wave only.
	FreezeWindows []FreezeWindow `json:"freezeWindows"`
	// Members are the wave's clusters, Clusters then those Selector
	// matches, in fleet order; set by Load.
	Members []string `json:"-"`
}

// ClusterNames returns the wave's clusters: Members as Load resolved them,
// else (a Config not made by Load) Clusters.
func (w Wave) ClusterNames() []string {
	if w.Members != nil {
		return w.Members
	}
	return w.Clusters
}

// Policy returns the wave's policy: its own fields, else the fleet's.
func (w Wave) Policy(fleet WavePolicy) WavePolicy {
	p := fleet
	if w.MaxParallel != nil {
		p.MaxParallel = w.MaxParallel
	}
	if w.MaxFailures != nil {
		p.MaxFailures = w.MaxFailures
	}
	if w.BakeTime != nil || w.RequiredSoakTime != nil {
		p.BakeTime, p.RequiredSoakTime = w.BakeTime, w.RequiredSoakTime
	}
	if w.Approvals != nil {
		p.Approvals = w.Approvals
	}
	if w.RequireSignature != nil {
		p.RequireSignature = w.RequireSignature
	}
	return p
}

// Limits scales the policy to a wave of n clusters: how many may run at
// once (0: no limit, else 1 to n) and how many may fail.
func (p WavePolicy) Limits(n int) (maxParallel, maxFailures int) {
	if p.MaxParallel != nil {
		if v, err := intstr.GetScaledValueFromIntOrPercent(p.MaxParallel, n, true); err == nil {
			maxParallel = max(min(v, n), 1)
		}
	}
	if p.MaxFailures != nil {
		if v, err := intstr.GetScaledValueFromIntOrPercent(p.MaxFailures, n, false); err == nil {
			maxFailures = v
		}
	}
	return maxParallel, max(maxFailures, 0)
}

// Application is one workload whose image flotilla tracks and delivers.
type Application struct {
	// Name is a DNS label, unique among applications.
	Name string `json:"name"`
	// ResourceNamespace is the namespace of the Application resource that
	// gives the application (pkg/resources), what its project follows
	// (projects[].namespaces); "" for the file's. Never in the file.
	ResourceNamespace string `json:"-"`
	// Image is the repository to track, "host[:port]/path", with an explicit
	// registry host and without tag or digest. Required, unless Source
	// names a git repository instead.
	Image string `json:"image"`
	// Source, instead of Image, makes the application follow a git
	// repository: a push changing what it tracks rolls that commit out.
	Source *Source `json:"source"`
	// Track is the version policy. Default TrackMinorVersion.
	Track Track `json:"track"`
	// Semver narrows a semantic track with a constraint
	// (Masterminds/semver syntax, as Flux's semverRange: ">=1.2, <2",
	// "~1.4", "^2"): a version outside it is skipped, saying so.
	Semver string `json:"semver"`
	// PreReleases lets pre-release versions (1.3.0-rc.1) roll out; by
	// default they are skipped.
	PreReleases bool `json:"preReleases"`
	// TagFilter admits only the tags its pattern matches, and compares
	// the version its extract template makes of them (Flux's filterTags).
	TagFilter *TagFilter `json:"tagFilter"`
	// DenyTags are Go regular expressions, each matched against the whole
	// tag: a push of a tag one matches never rolls out (Kargo's
	// ignoreTags, as patterns): known-bad releases, debug builds.
	DenyTags []string `json:"denyTags"`
	// Namespace holds the workload in every cluster. Default "default".
	Namespace string `json:"namespace"`
	// Workload is the object whose image flotilla updates.
	Workload Workload `json:"workload"`
	// Service is the port the workload serves on.
	Service Service `json:"service"`
	// Delivery is the progressive-delivery policy (a Flagger canary).
	Delivery Delivery `json:"delivery"`
	// GitOps, when set, keeps the image in a deployments repository too.
	GitOps *GitOps `json:"gitops"`
	// Validation is Kanary's validation of the canaries (manual, label
	// watch, PromQL), on top of the delivery's analysis.
	Validation *Validation `json:"validation"`
	// OnNewVersion says what a newer version does while a rollout of the
	// application is in flight: "supersede" (the default) ends that rollout
	// as Superseded, without rolling back what it touched, and starts the
	// new one from wave 1; "queue" lets it finish first (only the newest
	// waiting version is kept). A rollout rolling back is never cut short:
	// a newer version waits for it either way.
	OnNewVersion string `json:"onNewVersion"`
	// ClusterSelector limits the application to the clusters whose labels
	// (fleet.clusters[].labels) it matches (Kurator's
	// destination.clusterSelector); it must match at least one. Default:
	// every cluster of the fleet.
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector"`
	// FreezeWindows hold this application's rollouts only.
	FreezeWindows []FreezeWindow `json:"freezeWindows"`
	// Verify is what a pushed image must pass before it rolls out, on top
	// of its digest being re-resolved at the registry.
	Verify *Verify `json:"verify"`
	// Poll overrides fleet.poll for this application.
	Poll *Poll `json:"poll"`
	// DriftPolicy says what flotilla does when a cluster's primary runs
	// something else than the validated digest (a change by hand):
	// "report" (the default, also when empty: an event, a metric, the
	// API) or "revert"
	// (also a rollout of kind drift-revert that restores the validated
	// digest through the normal pipeline, to the drifted clusters only).
	// A git application's primary is held against the image its validated
	// commit renders for the cluster; revert re-applies that commit.
	DriftPolicy string `json:"driftPolicy"`
	// DependsOn are the members of the application's release set applied
	// (and ready: Jobs complete, canaries promoted) in each cluster before
	// it, as Flux's Kustomization dependsOn. Only for a member of a set.
	DependsOn []DependencyReference `json:"dependsOn"`
	// Set is set on a release set's application (Load builds it from
	// releaseSets): its members, in order.
	Set *SetSpec `json:"-"`
	// MemberOf names the release set the application is a member of: it
	// has no rollouts of its own, the set's carry it.
	MemberOf string `json:"-"`

	// Kurator's rollout block (an Application's syncPolicies[].rollout)
	// pasted as it is: serviceName and port are service.name and
	// service.port, rolloutPolicy is delivery, testLoader and
	// trafficRoutingProvider are delivery's; workload.namespace is
	// namespace (workload.apiVersion must be apps/v1). Set either name of
	// each, or both to the same value (kurator.go).
	ServiceName            string    `json:"serviceName"`
	Port                   int32     `json:"port"`
	RolloutPolicy          *Delivery `json:"rolloutPolicy"`
	TestLoader             bool      `json:"testLoader"`
	TrafficRoutingProvider string    `json:"trafficRoutingProvider"`
}

// Verify is an application's admission policy for images.
type Verify struct {
	// Signatures: the digest must carry a cosign signature by one of them
	// (any one suffices). Waves with requireSignature: false (the default
	// is true) take unsigned or wrongly signed builds; a rollout of one
	// stops before the first wave that requires a signature, and when its
	// first wave requires one the push is rejected.
	Signatures []SignatureAuthority `json:"signatures"`
	// IgnoreTlog accepts a key's signature without an entry in a Rekor
	// log (cosign's --insecure-ignore-tlog): weaker, since nothing then
	// records when the key signed, nor that it did. Default false: a key's
	// signature must be logged in its trustedRoot's Rekor log. Only with
	// key signers; keyless identities follow their trusted root.
	IgnoreTlog bool `json:"ignoreTlog"`
	// Attestations are in-toto attestations the digest must carry besides
	// its signature: for each, a Sigstore bundle among its OCI referrers
	// (`cosign attest --type ...`, cosign v3's format) or a DSSE envelope
	// in its "sha256-<hex>.att" tag (cosign's old format,
	// --new-bundle-format=false) whose statement has
	// the predicate type, names the digest as its subject and is signed by
	// one of Signatures' signers under the same rules (a key's log entry
	// unless ignoreTlog). A digest without one is refused like an unsigned
	// one. Default: none.
	Attestations []Attestation `json:"attestations"`
}

// Attestation is an attestation an application requires.
type Attestation struct {
	// PredicateType is the in-toto predicate type, a URI
	// ("https://slsa.dev/provenance/v1": cosign's slsaprovenance1;
	// "https://cosign.sigstore.dev/attestation/vuln/v1": its vuln). Required.
	PredicateType string `json:"predicateType"`
}

// SignatureAuthority is one signer an application trusts: a cosign public
// key, or a keyless identity.
type SignatureAuthority struct {
	// Name names the authority in messages and records. Required.
	Name string `json:"name"`
	// Key is a cosign public key, PEM (cosign.pub), in a file (a mounted
	// Secret) or an environment variable.
	Key *Secret `json:"key"`
	// KeyValue is Key's PEM, read by Load.
	KeyValue string `json:"-"`
	// TrustedRoot is, for a key, Sigstore's trusted_root.json whose Rekor
	// logs its signatures must have an entry in, as a file. Required with
	// key unless verify.ignoreTlog.
	TrustedRoot *Secret `json:"trustedRoot"`
	// TrustedRootValue is TrustedRoot's JSON, read by Load.
	TrustedRootValue string `json:"-"`
	// Keyless trusts certificates issued under a trusted root to an
	// identity (Sigstore's keyless signing).
	Keyless *Keyless `json:"keyless"`
}

// Keyless is a Sigstore keyless identity: who the certificate was issued
// to, by which OIDC issuer, under which root.
type Keyless struct {
	// Issuer is the OIDC issuer, exactly
	// ("https://token.actions.githubusercontent.com"). Required.
	Issuer string `json:"issuer"`
	// Subject is a regular expression the certificate's subject (its URI
	// or e-mail SAN) must match in full. Required.
	Subject string `json:"subject"`
	// TrustedRoot is Sigstore's trusted_root.json: the certificate
	// authorities (and transparency logs) to trust. flotilla does not
	// fetch it (no TUF): give it as a file. Required.
	TrustedRoot *Secret `json:"trustedRoot"`
	// TrustedRootValue is TrustedRoot's JSON, read by Load.
	TrustedRootValue string `json:"-"`
}

// FreezeWindows returns the windows that hold wave (by name) of app's
// rollouts: the fleet's, the wave's and the application's. A window that
// does not compile (validation refuses it) is left out.
func (c *Config) FreezeWindows(app Application, wave string) []freeze.Window {
	var out []freeze.Window
	lists := [][]FreezeWindow{c.Fleet.FreezeWindows, app.FreezeWindows}
	for _, w := range c.Fleet.Waves {
		if w.Name == wave {
			lists = append(lists, w.FreezeWindows)
		}
	}
	for _, l := range lists {
		for _, fw := range l {
			if w, err := fw.Window(); err == nil {
				out = append(out, w)
			}
		}
	}
	return out
}

// Targets reports whether the application goes to cluster c.
func (a Application) Targets(c Cluster) bool {
	if a.ClusterSelector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(a.ClusterSelector)
	if err != nil {
		return false // validation refuses it
	}
	return sel.Matches(labels.Set(c.Labels))
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

// What a newer version does to the rollout in flight.
const (
	OnNewVersionSupersede = "supersede"
	OnNewVersionQueue     = "queue"
)

// OnNewVersions lists the values of onNewVersion.
var OnNewVersions = []string{OnNewVersionSupersede, OnNewVersionQueue}

// Values of driftPolicy.
const (
	DriftPolicyReport = "report"
	DriftPolicyRevert = "revert"
)

// DriftPolicies lists the values of driftPolicy.
var DriftPolicies = []string{DriftPolicyReport, DriftPolicyRevert}

// TagFilter is a Go regular expression over tags and, optionally, the
// template of its groups that is the version ("$version", "${ts}").
type TagFilter struct {
	Pattern string `json:"pattern"`
	Extract string `json:"extract"`
}

// Regexp compiles the pattern.
func (f TagFilter) Regexp() (*regexp.Regexp, error) { return regexp.Compile(f.Pattern) }

// DeniedBy returns the first of a's denyTags that matches all of tag, ""
// when none does (or one does not compile: validation refuses it).
func (a Application) DeniedBy(tag string) string {
	for _, p := range a.DenyTags {
		if re, err := regexp.Compile(`^(?:` + p + `)$`); err == nil && re.MatchString(tag) {
			return p
		}
	}
	return ""
}

// Tracks lists the tracks a config may name.
var Tracks = []Track{TrackPatchLevel, TrackMinorVersion, TrackMajorVersion, TrackNewest}

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
