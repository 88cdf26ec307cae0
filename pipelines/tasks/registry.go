package tasks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
)

// Params are a task's parameters and Results its results, both by their
// Tekton names.
type (
	Params  map[string]string
	Results map[string]string
)

// Env is what a step needs besides its params. In a Tekton pod it comes from
// the Secrets mounted into the step (see Invocation.Env); the embedded
// executor supplies its own.
type Env struct {
	// Cluster returns the client configuration of the target cluster.
	Cluster func() (*rest.Config, error)
	// GitAuth returns the credentials for the deployments repository at url.
	GitAuth func(url string) (gitops.Auth, error)
	// Mirror, when set, keeps the repositories apply-manifests renders
	// from between runs; nil: each run fetches a copy of its own.
	Mirror *gitops.Mirror
}

// Def is one task: its params, results and step logic. `flotilla task
// <Name> --<param>=... --result-<result>=<path>` runs it in a Tekton step;
// the embedded executor parses the same command line and calls Run, so both
// run the same code.
type Def struct {
	Name  string
	Short string
	// Params are the flags of the command, one per Tekton param.
	Params []Param
	// Results are the results Run returns; --result-<name> names the file
	// each is written to.
	Results []string
	// Cluster is true when the task talks to the target cluster
	// (--kubeconfig, --context), Git when it writes to a git repository
	// (--git-credentials).
	Cluster, Git bool
	// Run is the step logic.
	Run func(ctx context.Context, env Env, p Params) (Results, error)
}

// Param is one parameter of a task.
type Param struct {
	Name     string
	Default  string
	Required bool
	Usage    string
}

// ResultError is the result every task writes its error to when it fails
// (truncated to fit a termination message), so a failed TaskRun says why.
const ResultError = "error"

// ExitPermanent is the exit code of `flotilla task ...` for a permanent
// error: the Tekton executor reads it from the failed step and does not ask
// for a retry.
const ExitPermanent = 3

// MaxErrorResult bounds the error result: Tekton carries results in a
// termination message of at most 4 KiB.
const MaxErrorResult = 1024

var registry = []Def{applyCanaryDef, bumpImageDef, applyManifestsDef}

// Defs lists every task.
func Defs() []Def { return slices.Clone(registry) }

// Lookup returns the task named name.
func Lookup(name string) (Def, bool) {
	for _, d := range registry {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}

// Invocation is one command line of a task, bound to a flag set by Bind.
type Invocation struct {
	def     Def
	fs      *pflag.FlagSet
	params  map[string]*string
	results map[string]*string
	// Kubeconfig and Context locate the target cluster (Def.Cluster).
	Kubeconfig, Context string
	// GitCredentials is a directory holding a git Secret's keys (Def.Git).
	GitCredentials string
}

// Bind defines the task's flags on fs and returns where they land.
func (d Def) Bind(fs *pflag.FlagSet) *Invocation {
	in := &Invocation{def: d, fs: fs, params: map[string]*string{}, results: map[string]*string{}}
	for _, p := range d.Params {
		in.params[p.Name] = fs.String(p.Name, p.Default, p.Usage)
	}
	for _, r := range append(slices.Clone(d.Results), ResultError) {
		in.results[r] = fs.String("result-"+r, "", "file to write the "+r+" result to (a Tekton $(results."+r+".path))")
	}
	if d.Cluster {
		fs.StringVar(&in.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the target cluster")
		fs.StringVar(&in.Context, "context", "", "context of the kubeconfig (default: current)")
	}
	if d.Git {
		fs.StringVar(&in.GitCredentials, "git-credentials", "", "directory holding the deployments repository's credentials "+
			"(a mounted Secret's keys: username, password, token, ssh-privatekey, ssh-passphrase, known_hosts)")
	}
	return in
}

// Parse parses a step's arguments (after `task <name>`) into a new
// Invocation.
func (d Def) Parse(args []string) (*Invocation, error) {
	fs := pflag.NewFlagSet(d.Name, pflag.ContinueOnError)
	fs.SetOutput(discard{})
	in := d.Bind(fs)
	if err := fs.Parse(args); err != nil {
		return nil, fault.Permanent(fmt.Errorf("task %s: %w", d.Name, err))
	}
	if fs.NArg() > 0 {
		return nil, fault.Permanent(fmt.Errorf("task %s: unexpected arguments %q", d.Name, fs.Args()))
	}
	return in, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// Params returns the values of the params, and an error naming the
// required ones that are empty.
func (in *Invocation) Params() (Params, error) {
	p := Params{}
	var missing []string
	for _, spec := range in.def.Params {
		v := *in.params[spec.Name]
		if spec.Required && v == "" {
			missing = append(missing, "--"+spec.Name)
		}
		p[spec.Name] = v
	}
	if len(missing) > 0 {
		return p, fault.Permanent(fmt.Errorf("task %s: required flags not set: %s", in.def.Name, strings.Join(missing, ", ")))
	}
	return p, nil
}

// Set sets a param as if given on the command line.
func (in *Invocation) Set(name, value string) error { return in.fs.Set(name, value) }

// Changed tells whether a flag was given.
func (in *Invocation) Changed(name string) bool { return in.fs.Changed(name) }

// ResultPaths maps each result given a --result-<name> path to that path.
func (in *Invocation) ResultPaths() map[string]string {
	out := map[string]string{}
	for name, p := range in.results {
		if *p != "" {
			out[name] = *p
		}
	}
	return out
}

// Env is the step's environment from its flags: the target cluster from
// --kubeconfig/--context, the git credentials from --git-credentials.
func (in *Invocation) Env() Env {
	return Env{
		Cluster: func() (*rest.Config, error) {
			if in.Kubeconfig == "" {
				return nil, fault.Permanent(fmt.Errorf("task %s: no --kubeconfig", in.def.Name))
			}
			return kube.RESTConfig(in.Kubeconfig, in.Context)
		},
		GitAuth: func(string) (gitops.Auth, error) { return GitAuthFromDir(in.GitCredentials) },
	}
}

// Run runs the task with the invocation's params and environment.
func (in *Invocation) Run(ctx context.Context, env Env) (Results, error) {
	p, err := in.Params()
	if err != nil {
		return nil, err
	}
	return in.def.Run(ctx, env, p)
}

// Git credential keys, as in the Secret types kubernetes.io/basic-auth
// (username, password) and kubernetes.io/ssh-auth (ssh-privatekey).
const (
	GitKeyUsername      = "username"
	GitKeyPassword      = "password"
	GitKeyToken         = "token"
	GitKeySSHPrivateKey = "ssh-privatekey"
	GitKeySSHPassphrase = "ssh-passphrase"
	GitKeyKnownHosts    = "known_hosts"
)

// GitAuthFromDir reads git credentials from a directory holding a mounted
// Secret's keys; missing keys (or dir "") mean no such credential.
func GitAuthFromDir(dir string) (gitops.Auth, error) {
	var a gitops.Auth
	if dir == "" {
		return a, nil
	}
	read := func(key string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, key))
		if os.IsNotExist(err) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("reading git credential %s: %w", key, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	var err error
	for key, dst := range map[string]*string{
		GitKeyUsername: &a.Username, GitKeyPassword: &a.Password, GitKeyToken: &a.Token, GitKeySSHPassphrase: &a.SSHKeyPassphrase,
	} {
		if *dst, err = read(key); err != nil {
			return a, err
		}
	}
	for key, dst := range map[string]*string{GitKeySSHPrivateKey: &a.SSHKeyFile, GitKeyKnownHosts: &a.SSHKnownHostsFile} {
		if _, err := os.Stat(filepath.Join(dir, key)); err == nil {
			*dst = filepath.Join(dir, key)
		}
	}
	return a, nil
}

// WriteResults writes each result to its path, as Tekton's
// $(results.<name>.path) files: the value as is, no trailing newline.
func WriteResults(res Results, paths map[string]string) error {
	for name, p := range paths {
		v, ok := res[name]
		if !ok {
			continue
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			return fmt.Errorf("writing result %s: %w", name, err)
		}
	}
	return nil
}

// ErrorResult is the error result of a failed task: its message, truncated
// to MaxErrorResult bytes.
func ErrorResult(err error) string {
	msg := err.Error()
	if len(msg) > MaxErrorResult {
		msg = strings.ToValidUTF8(msg[:MaxErrorResult-3], "") + "..."
	}
	return msg
}
