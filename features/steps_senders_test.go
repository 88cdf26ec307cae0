package features

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"code.gitea.io/sdk/gitea"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/testkit/giteatest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/registrytest"
)

// The steps of senders.feature: webhooks sent by the real senders, the
// local Gitea's push webhook and Debian's docker-registry's notifications,
// each of them configured as an operator would, with nothing of the test's
// in between (#32).

func (s *scenario) registerSenderSteps(sc *godog.ScenarioContext) {
	sc.Step(`^a deployments repository on the local Gitea with the chart "([^"]*)" and values for clusters "([^"]*)"$`, s.giteaChartRepository)
	sc.Step(`^Gitea sends the repository's pushes to flotilla$`, s.giteaPushWebhook)
	sc.Step(`^the application's workloads are watched in every cluster$`, s.watchWorkloads)
	sc.Step(`^Gitea delivered the push of that commit to flotilla itself$`, s.giteaDeliveredPush)
	sc.Step(`^the clusters took that commit in wave order: "([^"]*)" promoted it before "([^"]*)" was given it$`, s.commitInWaveOrder)
	sc.Step(`^Debian's docker-registry, which notifies flotilla itself$`, s.notifyingRegistry)
	sc.Step(`^version "([^"]*)" is pushed to that registry$`, s.pushToRegistry)
	sc.Step(`^the registry itself notified flotilla of "([^"]*)" by its digest$`, s.registryNotified)
}

// giteaPushes is a scenario's repository on the local Gitea whose push
// webhook goes to flotilla's gitea receiver, checked with hookSecret.
type giteaPushes struct {
	srv        *giteatest.Server
	repo       string // its name, owned by giteatest.Admin
	hookSecret string
}

func (p *giteaPushes) client(ctx context.Context) (*gitea.Client, error) {
	return gitea.NewClient(p.srv.URL, gitea.SetToken(p.srv.Token), gitea.SetContext(ctx))
}

// authURL is the repository's URL with the token, for git push.
func (p *giteaPushes) authURL() string {
	u, _ := url.Parse(p.srv.RepoURL(giteatest.Admin, p.repo))
	u.User = url.UserPassword(giteatest.Admin, p.srv.Token)
	return u.String()
}

// giteaChartRepository makes an empty public repository on the shared
// Gitea and, in a work tree whose origin it is, the first commit of the
// chart (pushed once Gitea sends its pushes to flotilla). flotilla reads
// the repository over HTTP with no credentials; flotilla's config gets a
// gitea receiver with the webhook's secret.
//
// It does not take the shared Gitea from the pull request scenarios
// (pullRequestScenarios): what made Gitea on SQLite stall under load was
// several scenarios opening and merging pull requests at once; this one
// makes a repository, a webhook and two pushes, and its repository and
// webhook are its own, so no other scenario's deliveries reach its
// flotilla.
func (s *scenario) giteaChartRepository(ctx context.Context, chart, clusters string) error {
	if s.w == nil {
		if err := s.aRegistry(); err != nil { // the scenario's directory (its registry goes unused)
			return err
		}
	}
	srv, err := sharedGitea(ctx)
	if err != nil {
		return err
	}
	p := &giteaPushes{srv: srv, repo: "deployments-" + randomHex(4), hookSecret: randomHex(16)}
	c, err := p.client(ctx)
	if err != nil {
		return err
	}
	s.keepGiteaLog(srv.LogPath())
	if _, _, err := c.CreateRepo(gitea.CreateRepoOption{Name: p.repo, DefaultBranch: "main"}); err != nil {
		return fmt.Errorf("creating the repository on gitea: %w", err)
	}
	r := &gitRepo{work: filepath.Join(s.w.dir, "work"), commits: map[string]string{}, chart: chart,
		url: srv.RepoURL(giteatest.Admin, p.repo), gitea: p}
	if _, err := git(ctx, s.w.dir, "init", "--initial-branch=main", r.work); err != nil {
		return err
	}
	if _, err := git(ctx, r.work, "remote", "add", "origin", p.authURL()); err != nil {
		return err
	}
	if err := r.commitFirst(ctx, clusters); err != nil {
		return err
	}
	secret := filepath.Join(s.w.dir, "gitea.secret")
	if err := os.WriteFile(secret, []byte(p.hookSecret+"\n"), 0o600); err != nil {
		return err
	}
	s.w.configEdits = append(s.w.configEdits, func(cfg map[string]any) error {
		cfg["receivers"] = append(cfg["receivers"].([]map[string]any),
			map[string]any{"name": "gitea", "type": "gitea", "secret": map[string]string{"file": secret}})
		return nil
	})
	s.w.git = r
	return nil
}

// giteaPushWebhook creates the repository's webhook through Gitea's API,
// as its owner would in Gitea's settings: type gitea, JSON, the receiver's
// secret, push events only, to flotilla's gitea receiver on loopback
// (giteatest allows webhooks to loopback).
func (s *scenario) giteaPushWebhook(ctx context.Context) error {
	r := s.w.git
	if r == nil || r.gitea == nil {
		return errors.New("no repository on the local Gitea: a step making one comes first")
	}
	if s.w.flotilla == nil {
		return errors.New("flotilla is not configured: its step comes first")
	}
	c, err := r.gitea.client(ctx)
	if err != nil {
		return err
	}
	_, _, err = c.CreateRepoHook(giteatest.Admin, r.gitea.repo, gitea.CreateHookOption{
		Type: gitea.HookTypeGitea, Active: true, Events: []string{"push"},
		Config: map[string]string{"url": "http://" + s.w.flotilla.listen + "/hooks/gitea", "content_type": "json", "secret": r.gitea.hookSecret},
	})
	if err != nil {
		return fmt.Errorf("creating the push webhook on gitea: %w", err)
	}
	return nil
}

// giteaDeliveredPush: flotilla journaled the push of that commit as one
// its gitea receiver took from Gitea, under Gitea's delivery id, pushed by
// Gitea's user. The test delivers nothing itself, and polling is off
// (fleet.poll.interval 0s), so nothing but Gitea's webhook can have told
// flotilla of the commit.
func (s *scenario) giteaDeliveredPush(ctx context.Context) error {
	r := s.w.git
	commit := r.commits["that"]
	_, err := s.w.sink.waitFor(ctx, "Gitea's push of "+commit, func(e cloudevents.Event) bool {
		if e.Type() != events.TypeGitPushed {
			return false
		}
		p, err := events.Decode[events.GitPushed](e)
		return err == nil && p.After == commit && p.Sender == "gitea" && p.Receiver == "gitea" &&
			p.DeliveryID != "" && p.Pusher == giteatest.Admin && p.Ref == "refs/heads/main" && p.RepoURL == r.url
	})
	return err
}

// workloadWatch records, for each cluster, every revision each of the
// application's Deployments (the workload and Flagger's primary) ran, in
// the order the cluster's API server reported them.
type workloadWatch struct {
	mu   sync.Mutex
	seen map[string][]revisionSeen // by cluster + "/" + deployment
}

type revisionSeen struct {
	revision string
	at       time.Time
}

// firstSeen is when the deployment in cluster first ran revision.
func (w *workloadWatch) firstSeen(cluster, deployment, revision string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.seen[cluster+"/"+deployment] {
		if r.revision == revision {
			return r.at, true
		}
	}
	return time.Time{}, false
}

func (w *workloadWatch) record(cluster string, d *appsv1.Deployment) {
	rev := d.Spec.Template.Annotations[canary.AnnotationRevision]
	w.mu.Lock()
	defer w.mu.Unlock()
	k := cluster + "/" + d.Name
	if n := len(w.seen[k]); n > 0 && w.seen[k][n-1].revision == rev {
		return
	}
	w.seen[k] = append(w.seen[k], revisionSeen{revision: rev, at: time.Now()})
}

// watchWorkloads watches the Deployments of the scenario's namespace in
// every cluster of the waves from now on, from their current resource
// version, re-watching when the API server ends a watch: no change is
// missed between two samples.
func (s *scenario) watchWorkloads(ctx context.Context) error {
	if s.w.git == nil {
		return errors.New("no deployments repository: a step making one comes first")
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.onCleanup(cancel)
	w := &workloadWatch{seen: map[string][]revisionSeen{}}
	s.w.git.workloads = w
	for _, c := range s.w.clusters {
		deployments := c.Kube.AppsV1().Deployments(s.w.namespace)
		list, err := deployments.List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing Deployments in %s: %w", c.Name, err)
		}
		for i := range list.Items {
			w.record(c.Name, &list.Items[i])
		}
		rw, err := watchtools.NewRetryWatcherWithContext(wctx, list.ResourceVersion, &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return deployments.Watch(ctx, o)
			},
		})
		if err != nil {
			return fmt.Errorf("watching Deployments in %s: %w", c.Name, err)
		}
		go func(cluster string) {
			defer rw.Stop()
			for ev := range rw.ResultChan() {
				if d, ok := ev.Object.(*appsv1.Deployment); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
					w.record(cluster, d)
				}
			}
		}(c.Name)
	}
	return nil
}

// commitInWaveOrder waits until the later cluster's primary runs that
// commit (Flagger promoted it there: both waves are through), then reads
// from the watch that the earlier cluster's primary ran it before the
// later cluster's workload was changed to it: a rollout that applied every
// wave at once, or did not wait for the first wave's promotion, fails
// here.
func (s *scenario) commitInWaveOrder(ctx context.Context, first, later string) error {
	w := s.w.git.workloads
	if w == nil {
		return errors.New("the workloads are not watched: the watching step comes first")
	}
	rev := s.w.git.url + "@" + s.w.git.commits["that"]
	workload, primary := s.w.workload, s.w.workload+"-primary"
	deadline := time.Now().Add(waitTimeout)
	for {
		if _, ok := w.firstSeen(later, primary, rev); ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the primary in %s never ran %s (watched %s)", later, rev, waitTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	given, ok := w.firstSeen(later, workload, rev)
	if !ok {
		return fmt.Errorf("the primary in %s runs %s, and its workload was never seen running it", later, rev)
	}
	promoted, ok := w.firstSeen(first, primary, rev)
	if !ok {
		return fmt.Errorf("the workload in %s ran %s at %s, and the primary in %s had not run it", later, rev, given.Format(time.RFC3339Nano), first)
	}
	if !promoted.Before(given) {
		return fmt.Errorf("the primary in %s ran %s at %s, not before the workload in %s was given it at %s",
			first, rev, promoted.Format(time.RFC3339Nano), later, given.Format(time.RFC3339Nano))
	}
	return nil
}

// notifyingRegistry runs Debian's docker-registry, open (no users, so its
// notifications name no actor), whose own notifications of pushes and
// pulls go to the address flotilla will listen on, with the registry
// receiver's token in the Authorization header of its endpoint config.
func (s *scenario) notifyingRegistry(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "flotilla-scenario-*")
	if err != nil {
		return err
	}
	s.w = &world{dir: dir, digests: map[string]string{}, pushes: map[string][]byte{}}
	w := s.w
	if w.listen, err = freePort(ctx); err != nil {
		return err
	}
	w.registryToken = randomHex(16)
	reg, err := registrytest.Start(ctx, filepath.Join(dir, "registry"), registrytest.Options{
		NotifyURL:     "http://" + w.listen + "/hooks/registry",
		NotifyHeaders: map[string][]string{"Authorization": {"Bearer " + w.registryToken}},
	})
	if err != nil {
		return err
	}
	s.onCleanup(reg.Stop)
	w.regHost, w.regLog = reg.Host, reg.Log
	return nil
}

// pushToRegistry pushes a new image as repo:version, anonymously; the
// registry notifies flotilla of it, the test delivers nothing.
func (s *scenario) pushToRegistry(ctx context.Context, version string) error {
	w := s.w
	img, err := random.Image(256, 1)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(w.regHost + "/" + w.repo + ":" + version)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	w.digests[version] = d.String()
	return nil
}

// registryNotified: flotilla journaled the push of version as one its
// distribution receiver took from the registry's notification: the
// registry's host and the repository, the digest of the pushed manifest,
// and the registry's event id. The test never posts a notification here.
func (s *scenario) registryNotified(ctx context.Context, version string) error {
	w := s.w
	digest := w.digests[version]
	if digest == "" {
		return fmt.Errorf("version %s was not pushed", version)
	}
	_, err := w.sink.waitFor(ctx, "the registry's notification of "+version, func(e cloudevents.Event) bool {
		if e.Type() != events.TypeImagePushed {
			return false
		}
		p, err := events.Decode[events.ImagePushed](e)
		return err == nil && p.Tag == version && p.Digest == digest && p.Registry == w.regHost &&
			p.Repository == w.repo && p.Sender == "distribution" && p.Receiver == "registry" && p.DeliveryID != "" &&
			!strings.HasPrefix(p.DeliveryID, "sha256-")
	})
	return err
}
