package fleettest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tektoncd/pipeline/pkg/apis/pipeline"
	"github.com/tektoncd/pipeline/pkg/result"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// The local fleet's kwok plays the kubelet: it makes TaskRun pods Running
// and, unless they carry the label simfail, completes them without running
// anything. HostSteps takes the pods labelled simfail=on-host instead (kwok
// has no stage for that value) and really runs their steps: each step's
// command, which Tekton moved behind its entrypoint's "--", runs on this
// machine with flotilla's binary, its Secret volumes copied to temporary
// directories and its $(results.*.path) files redirected to one; then the
// pod's status is written as the kubelet would after Tekton's entrypoint
// ran: each step container terminated with its exit code and a
// termination message holding the results, in the entrypoint's format
// (tektoncd/pipeline pkg/entrypoint and pkg/termination), which Tekton's
// controller turns into the TaskRun's results (pkg/pod/status.go).
//
// Label the PipelineRuns whose steps must run on the host with
// HostStepsLabel=HostStepsValue: Tekton passes a PipelineRun's labels on
// to its TaskRuns and their pods.
const (
	HostStepsLabel = "simfail"
	HostStepsValue = "on-host"
)

// entrypointTimeFormat is the entrypoint's StartedAt format.
const entrypointTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// HostSteps runs the steps of the on-host pods of one namespace; see
// HostStepsLabel.
type HostSteps struct {
	kube      kubernetes.Interface
	namespace string
	flotilla  string // the binary that stands for the image's flotilla
	logf      func(format string, args ...any)
	cancel    context.CancelFunc

	mu   sync.Mutex
	seen map[string]bool // pod UIDs
	ran  []string        // "<pod>: <args> (exit n): <output>", for failure messages
	wg   sync.WaitGroup
}

// StartHostSteps runs the steps of namespace's on-host pods with the
// flotilla binary until ctx ends or Stop is called. logf receives what
// kept a pod's steps from running (a step that ran and failed is no such
// thing: the pod reports it); nil discards it.
func StartHostSteps(ctx context.Context, kube kubernetes.Interface, namespace, flotilla string, logf func(format string, args ...any)) *HostSteps {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithCancel(ctx)
	h := &HostSteps{kube: kube, namespace: namespace, flotilla: flotilla, logf: logf, cancel: cancel, seen: map[string]bool{}}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.loop(ctx)
	}()
	return h
}

// Stop stops taking pods and waits for the steps under way to end (they
// are killed).
func (h *HostSteps) Stop() {
	h.cancel()
	h.wg.Wait()
}

// Log is what the steps run so far printed, one line a step, for failure
// messages.
func (h *HostSteps) Log() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.ran, "\n")
}

func (h *HostSteps) loop(ctx context.Context) {
	sel := HostStepsLabel + "=" + HostStepsValue
	pause := func() {
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	for ctx.Err() == nil {
		list, err := h.kube.CoreV1().Pods(h.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			pause()
			continue
		}
		for i := range list.Items {
			h.consider(ctx, &list.Items[i])
		}
		w, err := h.kube.CoreV1().Pods(h.namespace).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			pause()
			continue
		}
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
				h.consider(ctx, pod)
			}
		}
		w.Stop()
	}
}

// consider runs the pod's steps once kwok made it Running.
func (h *HostSteps) consider(ctx context.Context, pod *corev1.Pod) {
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return
	}
	h.mu.Lock()
	if h.seen[string(pod.UID)] {
		h.mu.Unlock()
		return
	}
	h.seen[string(pod.UID)] = true
	h.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if err := h.run(ctx, pod.DeepCopy()); err != nil && ctx.Err() == nil {
			h.logf("running the steps of pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
	}()
}

// stepOutcome is one step container's end.
type stepOutcome struct {
	exit              int32
	message           string
	started, finished time.Time
}

func (h *HostSteps) run(ctx context.Context, pod *corev1.Pod) error {
	dir, err := os.MkdirTemp("", "flotilla-step-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	mounts, err := h.volumes(ctx, pod, dir)
	if err != nil {
		return err
	}
	resultsDir := filepath.Join(dir, "results")
	if err := os.MkdirAll(resultsDir, 0o755); err != nil {
		return err
	}
	outcomes := map[string]stepOutcome{}
	failed := false
	for _, c := range pod.Spec.Containers {
		if !strings.HasPrefix(c.Name, "step-") {
			continue
		}
		if failed { // Tekton's entrypoint skips the steps after a failed one
			outcomes[c.Name] = stepOutcome{exit: 1, started: time.Now(), finished: time.Now()}
			continue
		}
		o, err := h.runStep(ctx, pod, c, mounts, resultsDir)
		if err != nil {
			return fmt.Errorf("step %s: %w", c.Name, err)
		}
		outcomes[c.Name] = o
		failed = o.exit != 0
	}
	return h.terminate(ctx, pod, outcomes)
}

// volumes copies the pod's Secret volumes into dir and returns the mount
// paths to rewrite, container path -> host path.
func (h *HostSteps) volumes(ctx context.Context, pod *corev1.Pod, dir string) (map[string]string, error) {
	secretDirs := map[string]string{} // volume name -> host dir
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		host := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(host, 0o700); err != nil {
			return nil, err
		}
		secretDirs[v.Name] = host
		s, err := h.kube.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && v.Secret.Optional != nil && *v.Secret.Optional {
			continue // an optional Secret that is missing mounts empty
		}
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		for k, b := range s.Data {
			if err := os.WriteFile(filepath.Join(host, k), b, 0o600); err != nil {
				return nil, err
			}
		}
	}
	mounts := map[string]string{}
	for _, c := range pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if host, ok := secretDirs[m.Name]; ok {
				mounts[m.MountPath] = host
			}
		}
	}
	return mounts, nil
}

// entrypointArgs splits the args Tekton gave its entrypoint into the
// original command, its args, and the names of the task's results.
func entrypointArgs(args []string) (command string, stepArgs, results []string, err error) {
	i := slices.Index(args, "--")
	if i < 0 {
		return "", nil, nil, fmt.Errorf("no -- in the entrypoint's args %q", args)
	}
	for j := 0; j+1 < i; j++ {
		switch args[j] {
		case "-entrypoint":
			command = args[j+1]
		case "-results":
			results = strings.Split(args[j+1], ",")
		}
	}
	if command == "" {
		return "", nil, nil, fmt.Errorf("no -entrypoint in %q", args)
	}
	return command, args[i+1:], results, nil
}

func (h *HostSteps) runStep(ctx context.Context, pod *corev1.Pod, c corev1.Container, mounts map[string]string, resultsDir string) (stepOutcome, error) {
	command, args, results, err := entrypointArgs(c.Args)
	if err != nil {
		return stepOutcome{}, err
	}
	if filepath.Base(command) != "flotilla" {
		return stepOutcome{}, fmt.Errorf("the step runs %q, not flotilla", command)
	}
	rewrite := func(s string) string {
		s = strings.ReplaceAll(s, pipeline.DefaultResultPath, resultsDir)
		for from, to := range mounts {
			s = strings.ReplaceAll(s, from, to)
		}
		return s
	}
	for i := range args {
		args[i] = rewrite(args[i])
	}
	cmd := exec.CommandContext(ctx, h.flotilla, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			cmd.Env = append(cmd.Env, e.Name+"="+rewrite(e.Value))
		}
	}
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	o := stepOutcome{started: time.Now()}
	err = cmd.Run()
	o.finished = time.Now()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		o.exit = int32(ee.ExitCode())
	case err != nil:
		return o, err
	}
	h.mu.Lock()
	h.ran = append(h.ran, fmt.Sprintf("%s: %s (exit %d): %s", pod.Name, strings.Join(args[:min(2, len(args))], " "), o.exit, strings.TrimSpace(output.String())))
	h.mu.Unlock()
	msg := []result.RunResult{{Key: "StartedAt", Value: o.started.Format(entrypointTimeFormat), ResultType: result.InternalTektonResultType}}
	for _, name := range results {
		b, err := os.ReadFile(filepath.Join(resultsDir, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return o, err
		}
		msg = append(msg, result.RunResult{Key: name, Value: string(b), ResultType: result.TaskRunResultType})
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return o, err
	}
	o.message = string(b)
	return o, nil
}

// terminate writes the pod's status as the kubelet would: every step
// terminated, the pod Succeeded or Failed.
func (h *HostSteps) terminate(ctx context.Context, pod *corev1.Pod, outcomes map[string]stepOutcome) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := h.kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phase := corev1.PodSucceeded
		var statuses []corev1.ContainerStatus
		for _, c := range cur.Spec.Containers {
			o, ok := outcomes[c.Name]
			if !ok {
				o = stepOutcome{started: time.Now(), finished: time.Now()}
			}
			reason := "Completed"
			if o.exit != 0 {
				reason, phase = "Error", corev1.PodFailed
			}
			statuses = append(statuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: o.exit, Reason: reason, Message: o.message,
					StartedAt: metav1.NewTime(o.started), FinishedAt: metav1.NewTime(o.finished),
				}},
			})
		}
		cur.Status.ContainerStatuses = statuses
		cur.Status.Phase = phase
		_, err = h.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}
