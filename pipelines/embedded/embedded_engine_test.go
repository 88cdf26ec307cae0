package embedded

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/google/go-cmp/cmp"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"sigs.k8s.io/yaml"
)

// fakeSteps runs steps whose args are instructions:
//
//	out=<result>=<value>  write a result
//	fail=<n>              fail the first n attempts
//	permanent             fail permanently
//	block                 wait until the context ends
//	wait=<task>           wait until <task> has started (parallelism)
//	record=<value>        record the value (substituted params)
type fakeSteps struct {
	mu      sync.Mutex
	started map[string]chan struct{}
	calls   []stepCall
	records map[string][]string // by pipeline task
}

func newFakeSteps() *fakeSteps {
	return &fakeSteps{started: map[string]chan struct{}{}, records: map[string][]string{}}
}

func (f *fakeSteps) startedCh(task string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.started[task]
	if !ok {
		ch = make(chan struct{})
		f.started[task] = ch
	}
	return ch
}

func (f *fakeSteps) run(ctx context.Context, c stepCall) (map[string]string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	if c.Attempt == 0 {
		close(f.startedCh(c.PipelineTask))
	}
	out := map[string]string{}
	for _, a := range c.Step.Args {
		key, val, _ := strings.Cut(a, "=")
		switch key {
		case "out":
			name, v, _ := strings.Cut(val, "=")
			out[name] = v
		case "fail":
			n, _ := strconv.Atoi(val)
			if c.Attempt < n {
				return out, fmt.Errorf("attempt %d fails", c.Attempt)
			}
		case "permanent":
			return out, fault.Permanent(errors.New("cannot work"))
		case "block":
			<-ctx.Done()
			return out, ctx.Err()
		case "wait":
			select {
			case <-f.startedCh(val):
			case <-time.After(5 * time.Second):
				return out, fmt.Errorf("%s never started alongside %s", val, c.PipelineTask)
			}
		case "record":
			f.mu.Lock()
			f.records[c.PipelineTask] = append(f.records[c.PipelineTask], val)
			f.mu.Unlock()
		}
	}
	return out, nil
}

func (f *fakeSteps) attempts(task string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.PipelineTask == task {
			n++
		}
	}
	return n
}

func parsePipeline(t *testing.T, doc string) *tektonv1.Pipeline {
	t.Helper()
	var p tektonv1.Pipeline
	if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
		t.Fatalf("parsing pipeline: %v", err)
	}
	return &p
}

func parseTask(t *testing.T, doc string) *tektonv1.Task {
	t.Helper()
	var task tektonv1.Task
	if err := yaml.UnmarshalStrict([]byte(doc), &task); err != nil {
		t.Fatalf("parsing task: %v", err)
	}
	return &task
}

// step is a Task of one step whose args come from the pipeline task's
// "args" param, split on spaces, and which declares results r and s.
const stepTask = `
apiVersion: tekton.dev/v1
kind: Task
metadata: {name: step}
spec:
  params:
    - {name: args, type: string, default: ""}
    - {name: extra, type: string, default: "dflt"}
  results:
    - {name: r}
    - {name: s}
  steps:
    - name: run
      image: x
      command: [fake]
      args: ["$(params.args)", "record=extra:$(params.extra)", "record=ctx:$(context.taskRun.name)/$(context.task.retry-count)", "record=path:$(results.r.path)"]
`

func newEngine(t *testing.T, f *fakeSteps) *engine {
	t.Helper()
	task := parseTask(t, stepTask)
	return &engine{tasks: map[string]*tektonv1.TaskSpec{"step": &task.Spec}, step: splitArgs(f.run)}
}

// splitArgs splits the first arg on spaces: the pipeline task's "args"
// param carries several instructions.
func splitArgs(next stepRunner) stepRunner {
	return func(ctx context.Context, c stepCall) (map[string]string, error) {
		if len(c.Step.Args) > 0 {
			c.Step.Args = append(strings.Fields(c.Step.Args[0]), c.Step.Args[1:]...)
		}
		return next(ctx, c)
	}
}

func TestEngineDAGOrderAndParallelism(t *testing.T) {
	p := parsePipeline(t, `
metadata: {name: dag}
spec:
  tasks:
    - {name: a, taskRef: {name: step}}
    - {name: b, runAfter: [a], taskRef: {name: step}, params: [{name: args, value: "wait=c"}]}
    - {name: c, runAfter: [a], taskRef: {name: step}, params: [{name: args, value: "wait=b"}]}
    - {name: d, runAfter: [b, c], taskRef: {name: step}}
`)
	f := newFakeSteps()
	out, err := newEngine(t, f).run(t.Context(), p, "run1", nil, 10*time.Second)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	var order []string
	for _, c := range f.calls {
		order = append(order, c.PipelineTask)
	}
	if order[0] != "a" || order[3] != "d" || !slices.Contains(order[1:3], "b") || !slices.Contains(order[1:3], "c") {
		t.Errorf("order %v: want a, then b and c together, then d", order)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		if out.Tasks[n].State != StateSucceeded {
			t.Errorf("task %s: %+v", n, out.Tasks[n])
		}
	}
}

func TestEngineSubstitution(t *testing.T) {
	p := parsePipeline(t, `
metadata: {name: subst}
spec:
  params:
    - {name: image, type: string}
    - {name: who, type: string, default: "dflt-who"}
  tasks:
    - name: first
      taskRef: {name: step}
      params:
        - {name: args, value: "out=r=prev-of-$(params.image) record=$(params['who'])"}
    - name: second
      taskRef: {name: step}
      params:
        - {name: args, value: "record=$(tasks.first.results.r) record=$(context.pipelineRun.name)/$(context.pipeline.name) out=s=done"}
        - {name: extra, value: '$(params["image"])'}
  results:
    - {name: previous, value: "$(tasks.first.results.r)"}
    - {name: both, value: "$(tasks.first.results.r)+$(tasks.second.results.s)"}
`)
	f := newFakeSteps()
	out, err := newEngine(t, f).run(t.Context(), p, "run1", map[string]string{"image": "img@sha256:1"}, 10*time.Second)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	want := map[string][]string{
		"first": {"dflt-who", "extra:dflt", "ctx:run1-first/0", "path:/tekton/results/r"},
		"second": {"prev-of-img@sha256:1", "run1/subst", "extra:img@sha256:1", "ctx:run1-second/0",
			"path:/tekton/results/r"},
	}
	if diff := cmp.Diff(want, f.records); diff != "" {
		t.Errorf("substituted values (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"previous": "prev-of-img@sha256:1", "both": "prev-of-img@sha256:1+done"}, out.Results); diff != "" {
		t.Errorf("pipeline results (-want +got):\n%s", diff)
	}
}

func TestEngineWhen(t *testing.T) {
	p := parsePipeline(t, `
metadata: {name: when}
spec:
  params:
    - {name: gitops, type: string, default: "false"}
  tasks:
    - name: bump
      when: [{input: $(params.gitops), operator: in, values: ["true"]}]
      taskRef: {name: step}
      params: [{name: args, value: "out=r=commit1"}]
    - name: apply
      runAfter: [bump]
      taskRef: {name: step}
      params: [{name: args, value: "out=r=applied"}]
    - name: uses-commit
      taskRef: {name: step}
      params: [{name: args, value: "record=$(tasks.bump.results.r)"}]
    - name: not-gitops
      when: [{input: $(params.gitops), operator: notin, values: ["true"]}]
      taskRef: {name: step}
  results:
    - {name: commit, value: $(tasks.bump.results.r)}
    - {name: applied, value: $(tasks.apply.results.r)}
`)
	for _, tt := range []struct {
		gitops      string
		wantStates  map[string]string
		wantResults map[string]string
	}{
		{
			gitops:      "false",
			wantStates:  map[string]string{"bump": StateSkipped, "apply": StateSucceeded, "uses-commit": StateSkipped, "not-gitops": StateSucceeded},
			wantResults: map[string]string{"applied": "applied"},
		},
		{
			gitops:      "true",
			wantStates:  map[string]string{"bump": StateSucceeded, "apply": StateSucceeded, "uses-commit": StateSucceeded, "not-gitops": StateSkipped},
			wantResults: map[string]string{"applied": "applied", "commit": "commit1"},
		},
	} {
		t.Run("gitops="+tt.gitops, func(t *testing.T) {
			f := newFakeSteps()
			out, err := newEngine(t, f).run(t.Context(), p, "run1", map[string]string{"gitops": tt.gitops}, 10*time.Second)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			states := map[string]string{}
			for n, o := range out.Tasks {
				states[n] = o.State
			}
			if diff := cmp.Diff(tt.wantStates, states); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantResults, out.Results); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEngineRetriesAndTimeouts(t *testing.T) {
	for _, tt := range []struct {
		name         string
		task         string // the pipeline task's fields after its name
		timeout      time.Duration
		wantAttempts int
		wantErr      func(error) bool
	}{
		{
			name: "flaky task succeeds on its last retry", task: `retries: 2, params: [{name: args, value: "fail=2"}]`,
			wantAttempts: 3,
		},
		{
			name: "retries run out", task: `retries: 1, params: [{name: args, value: "fail=5"}]`,
			wantAttempts: 2, wantErr: func(err error) bool { return err != nil && !fault.IsPermanent(err) },
		},
		{
			name: "permanent failure is not retried", task: `retries: 3, params: [{name: args, value: "permanent"}]`,
			wantAttempts: 1, wantErr: fault.IsPermanent,
		},
		{
			name: "each attempt times out, and is retried", task: `retries: 1, timeout: 50ms, params: [{name: args, value: "block"}]`,
			wantAttempts: 2, wantErr: func(err error) bool {
				return errors.Is(err, context.DeadlineExceeded) && strings.Contains(err.Error(), "timed out after 50ms")
			},
		},
		{
			name: "the run's timeout ends it, without retries", task: `retries: 3, params: [{name: args, value: "block"}]`,
			timeout: 100 * time.Millisecond, wantAttempts: 1, wantErr: func(err error) bool { return errors.Is(err, context.DeadlineExceeded) },
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := parsePipeline(t, "metadata: {name: p}\nspec:\n  tasks:\n    - {name: t, taskRef: {name: step}, "+tt.task+"}\n")
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			f := newFakeSteps()
			out, err := newEngine(t, f).run(t.Context(), p, "run1", nil, timeout)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !tt.wantErr(err) {
				t.Errorf("run: %v", err)
			}
			if got := f.attempts("t"); got != tt.wantAttempts || out.Tasks["t"].Attempts != tt.wantAttempts {
				t.Errorf("attempts = %d (outcome %d), want %d", got, out.Tasks["t"].Attempts, tt.wantAttempts)
			}
		})
	}
}

func TestEngineFailureStopsTheRun(t *testing.T) {
	p := parsePipeline(t, `
metadata: {name: p}
spec:
  tasks:
    - {name: fails, taskRef: {name: step}, params: [{name: args, value: "wait=slow permanent"}]}
    - {name: after, runAfter: [fails], taskRef: {name: step}}
    - {name: slow, taskRef: {name: step}, params: [{name: args, value: "out=r=x"}]}
    - {name: after-slow, runAfter: [slow], taskRef: {name: step}}
`)
	f := newFakeSteps()
	out, err := newEngine(t, f).run(t.Context(), p, "run1", nil, 10*time.Second)
	if !fault.IsPermanent(err) || !strings.Contains(err.Error(), "task fails") {
		t.Fatalf("run: %v, want the permanent failure of task fails", err)
	}
	if _, ran := out.Tasks["after"]; ran || f.attempts("after") != 0 {
		t.Errorf("task after ran after its parent failed: %+v", out.Tasks["after"])
	}
	if out.Tasks["slow"].State != StateSucceeded {
		t.Errorf("task slow, running when the other failed, ended %+v; want it to finish", out.Tasks["slow"])
	}
}

func TestEngineRefusesBadPipelines(t *testing.T) {
	for _, tt := range []struct {
		name, spec, want string
	}{
		{"cycle", `tasks: [{name: a, runAfter: [b], taskRef: {name: step}}, {name: b, runAfter: [a], taskRef: {name: step}}]`, "cycle"},
		{"cycle through results", `tasks: [{name: a, runAfter: [b], taskRef: {name: step}}, {name: b, taskRef: {name: step}, params: [{name: args, value: $(tasks.a.results.r)}]}]`, "cycle"},
		{"unknown runAfter", `tasks: [{name: a, runAfter: [nope], taskRef: {name: step}}]`, `"nope"`},
		{"unknown result task", `tasks: [{name: a, taskRef: {name: step}, params: [{name: args, value: $(tasks.nope.results.r)}]}]`, `"nope"`},
		{"missing param", `{params: [{name: must, type: string}], tasks: [{name: a, taskRef: {name: step}}]}`, "param must is required"},
		{"unknown param", `tasks: [{name: a, taskRef: {name: step}, params: [{name: args, value: $(params.nope)}]}]`, "unknown variable $(params.nope)"},
		{"unknown task", `tasks: [{name: a, taskRef: {name: nope}}]`, `Task "nope"`},
		{"missing result", `tasks: [{name: a, taskRef: {name: step}}, {name: b, taskRef: {name: step}, params: [{name: args, value: $(tasks.a.results.r)}]}]`, "task a wrote no result r"},
		{"finally", `{tasks: [{name: a, taskRef: {name: step}}], finally: [{name: f, taskRef: {name: step}}]}`, "finally"},
		{"CEL", `tasks: [{name: a, taskRef: {name: step}, when: [{cel: "true"}]}]`, "CEL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			if !strings.HasPrefix(spec, "{") {
				spec = "{" + spec + "}"
			}
			p := parsePipeline(t, "metadata: {name: p}\nspec: "+spec+"\n")
			_, err := newEngine(t, newFakeSteps()).run(t.Context(), p, "run1", nil, 10*time.Second)
			if !fault.IsPermanent(err) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run: %v, want a permanent error saying %q", err, tt.want)
			}
		})
	}
}

func TestSubstitute(t *testing.T) {
	v := func(ref string) (string, bool) {
		m := map[string]string{"params.a": "A", "params.b-c": "BC", "tasks.t.results.r": "R"}
		s, ok := m[ref]
		return s, ok
	}
	for _, tt := range []struct{ in, want, err string }{
		{in: "plain", want: "plain"},
		{in: "$(params.a)-$(params['b-c'])-$(params[\"a\"])", want: "A-BC-A"},
		{in: "x=$(tasks.t.results.r)", want: "x=R"},
		{in: "$(params.zz)", err: "unknown variable $(params.zz)"},
		{in: "$$(params.a)", want: "$A"},
		// What the regular expression \$\(([^()$]+)\) matched, and only that.
		{in: "$()$(params.a)", want: "$()A"},
		{in: "$($(params.a))", want: "$(A)"},
		{in: "$(params.a", want: "$(params.a"},
		{in: "$(par(ams.a)", want: "$(par(ams.a)"},
		{in: "a $(params.a) b $(params.b-c) c", want: "a A b BC c"},
		{in: "$(params.a)$(params.a)", want: "AA"},
		{in: "$( params.a )", want: "A"},
		{in: "{\"json\":\"$(params.a)\",\"x\":[1,2]}", want: "{\"json\":\"A\",\"x\":[1,2]}"},
	} {
		got, err := substitute(tt.in, v)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("substitute(%q) = %q, %v; want error %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("substitute(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
