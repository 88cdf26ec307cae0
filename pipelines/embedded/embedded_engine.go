package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/tektoncd/pipeline/pkg/apis/pipeline"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
)

// stepCall is one step of one attempt of a pipeline task, its command,
// args and env substituted.
type stepCall struct {
	PipelineTask string
	TaskRun      string
	Attempt      int // 0 for the first
	Step         tektonv1.Step
}

// stepRunner runs one step. It returns the results the step wrote, by the
// name of their $(results.<name>.path) file, also when it fails.
type stepRunner func(ctx context.Context, c stepCall) (map[string]string, error)

// Task states of a run.
const (
	StateSucceeded = "Succeeded"
	StateFailed    = "Failed"
	StateSkipped   = "Skipped"
)

// TaskOutcome says how one pipeline task of a run ended.
type TaskOutcome struct {
	State    string
	Reason   string // why it was skipped or failed
	Attempts int
	Results  map[string]string
}

// runOutcome is what a run of a Pipeline produced.
type runOutcome struct {
	Results map[string]string
	Tasks   map[string]TaskOutcome
}

// engine runs a Tekton Pipeline in process, the way Tekton's controller
// would: a DAG from runAfter and result references, params and results
// substituted, when expressions, a timeout and retries per task, a timeout
// for the whole run. Its steps run through a stepRunner. Not supported (a
// permanent error): finally tasks, matrix, workspaces, pipelines in
// pipelines, onError, scripts, array and object params, CEL.
type engine struct {
	tasks map[string]*tektonv1.TaskSpec // by Task name, for taskRefs
	step  stepRunner
	log   *slog.Logger
}

// graph is the DAG of a pipeline's tasks.
type graph struct {
	// deps are the tasks each task waits for: runAfter and result
	// references; resultDeps only the latter.
	deps, resultDeps map[string][]string
}

func buildGraph(spec tektonv1.PipelineSpec) (graph, error) {
	g := graph{deps: map[string][]string{}, resultDeps: map[string][]string{}}
	known := map[string]bool{}
	for _, pt := range spec.Tasks {
		if pt.Name == "" || known[pt.Name] {
			return g, fault.Permanent(fmt.Errorf("pipeline task name %q: empty or not unique", pt.Name))
		}
		known[pt.Name] = true
	}
	add := func(list map[string][]string, task, dep string) {
		if !slices.Contains(list[task], dep) {
			list[task] = append(list[task], dep)
		}
	}
	for _, pt := range spec.Tasks {
		for _, dep := range pt.RunAfter {
			if !known[dep] || dep == pt.Name {
				return g, fault.Permanent(fmt.Errorf("pipeline task %s runs after %q, which is not another task of the pipeline", pt.Name, dep))
			}
			add(g.deps, pt.Name, dep)
		}
		for _, s := range pipelineTaskStrings(pt) {
			for _, ref := range resultRefs(s) {
				if !known[ref[0]] || ref[0] == pt.Name {
					return g, fault.Permanent(fmt.Errorf("pipeline task %s refers to results of %q, which is not another task of the pipeline", pt.Name, ref[0]))
				}
				add(g.deps, pt.Name, ref[0])
				add(g.resultDeps, pt.Name, ref[0])
			}
		}
	}
	for _, r := range spec.Results {
		for _, ref := range resultRefs(r.Value.StringVal) {
			if !known[ref[0]] {
				return g, fault.Permanent(fmt.Errorf("pipeline result %s refers to results of %q, which is not a task of the pipeline", r.Name, ref[0]))
			}
		}
	}
	// Kahn: every task must become ready once its deps are done.
	indeg := map[string]int{}
	users := map[string][]string{}
	for _, pt := range spec.Tasks {
		indeg[pt.Name] = len(g.deps[pt.Name])
		for _, d := range g.deps[pt.Name] {
			users[d] = append(users[d], pt.Name)
		}
	}
	var ready []string
	for _, pt := range spec.Tasks {
		if indeg[pt.Name] == 0 {
			ready = append(ready, pt.Name)
		}
	}
	seen := 0
	for len(ready) > 0 {
		n := ready[0]
		ready = ready[1:]
		seen++
		for _, u := range users[n] {
			if indeg[u]--; indeg[u] == 0 {
				ready = append(ready, u)
			}
		}
	}
	if seen != len(spec.Tasks) {
		var cyclic []string
		for _, pt := range spec.Tasks {
			if indeg[pt.Name] > 0 {
				cyclic = append(cyclic, pt.Name)
			}
		}
		return g, fault.Permanent(fmt.Errorf("pipeline tasks %s depend on each other in a cycle", strings.Join(cyclic, ", ")))
	}
	return g, nil
}

func checkSupported(spec tektonv1.PipelineSpec) error {
	unsupported := func(what string) error {
		return fault.Permanent(fmt.Errorf("%s: not supported by the embedded executor", what))
	}
	if len(spec.Finally) > 0 {
		return unsupported("finally tasks")
	}
	if len(spec.Workspaces) > 0 {
		return unsupported("workspaces")
	}
	for _, pt := range spec.Tasks {
		switch {
		case pt.Matrix != nil:
			return unsupported("task " + pt.Name + ": matrix")
		case len(pt.Workspaces) > 0:
			return unsupported("task " + pt.Name + ": workspaces")
		case pt.PipelineRef != nil || pt.PipelineSpec != nil:
			return unsupported("task " + pt.Name + ": pipelines in pipelines")
		case pt.OnError != "":
			return unsupported("task " + pt.Name + ": onError")
		case pt.TaskRef != nil && (pt.TaskRef.Resolver != "" || (pt.TaskRef.Kind != "" && pt.TaskRef.Kind != tektonv1.NamespacedTaskKind)):
			return unsupported("task " + pt.Name + ": remote or cluster task references")
		}
	}
	for _, ps := range spec.Params {
		if ps.Type != "" && ps.Type != tektonv1.ParamTypeString {
			return unsupported("param " + ps.Name + " of type " + string(ps.Type))
		}
	}
	return nil
}

// resolveParams applies defaults to given for specs, and refuses a
// required param that is missing.
func resolveParams(specs tektonv1.ParamSpecs, given map[string]string, where string) (map[string]string, error) {
	out := map[string]string{}
	for _, ps := range specs {
		if ps.Type != "" && ps.Type != tektonv1.ParamTypeString {
			return nil, fault.Permanent(fmt.Errorf("%s: param %s of type %s: not supported by the embedded executor", where, ps.Name, ps.Type))
		}
		if v, ok := given[ps.Name]; ok {
			out[ps.Name] = v
			continue
		}
		if ps.Default == nil {
			return nil, fault.Permanent(fmt.Errorf("%s: param %s is required", where, ps.Name))
		}
		out[ps.Name] = ps.Default.StringVal
	}
	return out, nil
}

// taskDone reports one pipeline task's end to the scheduler.
type taskDone struct {
	name    string
	outcome TaskOutcome
	err     error
}

// run runs the pipeline with params, as run name, within timeout (none
// when zero). It returns the pipeline's results and each task's outcome;
// the error is the first task's that failed, or the timeout's. Like
// Tekton, it starts no task after one failed and lets running ones end.
func (e *engine) run(ctx context.Context, p *tektonv1.Pipeline, name string, params map[string]string, timeout time.Duration) (runOutcome, error) {
	g, err := prepare(p.Spec)
	if err != nil {
		return runOutcome{Tasks: map[string]TaskOutcome{}}, err
	}
	return e.runGraph(ctx, p, g, name, params, timeout)
}

// prepare checks that the embedded executor supports spec and builds its
// graph: once per Pipeline, not per run (Executor.Run keeps the embedded
// Pipeline's).
func prepare(spec tektonv1.PipelineSpec) (graph, error) {
	if err := checkSupported(spec); err != nil {
		return graph{}, err
	}
	return buildGraph(spec)
}

// runGraph is run with p's graph g built already.
func (e *engine) runGraph(ctx context.Context, p *tektonv1.Pipeline, g graph, name string, params map[string]string, timeout time.Duration) (runOutcome, error) {
	out := runOutcome{Tasks: map[string]TaskOutcome{}}
	spec := p.Spec
	pparams, err := resolveParams(spec.Params, params, "pipeline "+p.Name)
	if err != nil {
		return out, err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	log := e.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("pipeline", p.Name, "pipelineRun", name)

	pipelineVars := func(ref string) (string, bool) {
		if k, ok := strings.CutPrefix(ref, "params."); ok {
			v, ok := pparams[k]
			return v, ok
		}
		if t, r, ok := parseResultRef(ref); ok {
			v, ok := out.Tasks[t].Results[r]
			return v, ok
		}
		switch ref {
		case "context.pipelineRun.name":
			return name, true
		case "context.pipeline.name":
			return p.Name, true
		case "context.pipelineRun.namespace":
			return "", true
		}
		return "", false
	}

	done := make(chan taskDone)
	running := 0
	var firstErr error
	fail := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	terminal := func(n string) bool { _, ok := out.Tasks[n]; return ok }
	started := map[string]bool{}
	ended := func(d taskDone) {
		running--
		out.Tasks[d.name] = d.outcome
		log.DebugContext(ctx, "task ended", "task", d.name, "state", d.outcome.State, "attempts", d.outcome.Attempts)
		if d.err != nil {
			fail(fmt.Errorf("task %s: %w", d.name, d.err))
		}
	}

	for {
		var launch []tektonv1.PipelineTask
		for changed := true; changed && firstErr == nil && ctx.Err() == nil; {
			changed = false
			for _, pt := range spec.Tasks {
				if firstErr != nil {
					break // like Tekton, start nothing after a failure
				}
				if started[pt.Name] || terminal(pt.Name) || !allOf(g.deps[pt.Name], terminal) {
					continue
				}
				changed = true
				if reason, skip := resultsMissing(pt, g, out); reason != "" {
					if skip {
						out.Tasks[pt.Name] = TaskOutcome{State: StateSkipped, Reason: reason}
						log.DebugContext(ctx, "task skipped", "task", pt.Name, "reason", reason)
					} else {
						out.Tasks[pt.Name] = TaskOutcome{State: StateFailed, Reason: reason}
						fail(fault.Permanent(fmt.Errorf("task %s: %s", pt.Name, reason)))
					}
					continue
				}
				rpt, err := substitutePipelineTask(pt, pipelineVars)
				if err != nil {
					out.Tasks[pt.Name] = TaskOutcome{State: StateFailed, Reason: err.Error()}
					fail(fmt.Errorf("task %s: %w", pt.Name, err))
					continue
				}
				ok, err := whenAllows(rpt.When)
				if err != nil {
					out.Tasks[pt.Name] = TaskOutcome{State: StateFailed, Reason: err.Error()}
					fail(fmt.Errorf("task %s: %w", pt.Name, err))
					continue
				}
				if !ok {
					out.Tasks[pt.Name] = TaskOutcome{State: StateSkipped, Reason: reasonWhenFalse}
					log.DebugContext(ctx, "task skipped", "task", pt.Name, "reason", reasonWhenFalse)
					continue
				}
				started[pt.Name] = true
				running++
				log.DebugContext(ctx, "task started", "task", pt.Name)
				launch = append(launch, rpt)
			}
		}
		if len(launch) == 1 && running == 1 {
			// The one task running: on this goroutine, whose stack has
			// grown already (a goroutine of its own grew one per run).
			o, err := e.runTask(ctx, name, launch[0])
			ended(taskDone{name: launch[0].Name, outcome: o, err: err})
			continue
		}
		for _, rpt := range launch {
			go func() {
				o, err := e.runTask(ctx, name, rpt)
				done <- taskDone{name: rpt.Name, outcome: o, err: err}
			}()
		}
		if running == 0 {
			break
		}
		ended(<-done)
	}
	if err := ctx.Err(); err != nil {
		if firstErr == nil {
			firstErr = fmt.Errorf("pipeline run %s: %w", name, err)
		} else if !errors.Is(firstErr, err) {
			firstErr = fmt.Errorf("pipeline run %s: %w: %w", name, err, firstErr)
		}
	}
	out.Results = map[string]string{}
	for _, r := range spec.Results {
		// A result that refers to a skipped task, or a result its task did
		// not write, is left out, as Tekton does.
		if v, err := substitute(r.Value.StringVal, pipelineVars); err == nil {
			out.Results[r.Name] = v
		}
	}
	return out, firstErr
}

// Reasons a task was skipped.
const (
	reasonWhenFalse     = "when expressions evaluated to false"
	reasonParentSkipped = "results of a skipped task are missing"
)

func allOf(names []string, f func(string) bool) bool {
	for _, n := range names {
		if !f(n) {
			return false
		}
	}
	return true
}

// resultsMissing says why pt cannot run for want of its parents' results:
// a parent whose results it uses was skipped (skip: pt is skipped too), or
// a parent did not write a result it refers to (the run fails, as Tekton's
// does).
func resultsMissing(pt tektonv1.PipelineTask, g graph, out runOutcome) (reason string, skip bool) {
	for _, d := range g.resultDeps[pt.Name] {
		if out.Tasks[d].State != StateSucceeded {
			return reasonParentSkipped, true
		}
	}
	for _, s := range pipelineTaskStrings(pt) {
		for _, ref := range resultRefs(s) {
			if _, ok := out.Tasks[ref[0]].Results[ref[1]]; !ok {
				return fmt.Sprintf("task %s wrote no result %s", ref[0], ref[1]), false
			}
		}
	}
	return "", false
}

// substitutePipelineTask substitutes pipeline params, task results and
// context in a copy of pt's params and when expressions.
func substitutePipelineTask(pt tektonv1.PipelineTask, v vars) (tektonv1.PipelineTask, error) {
	// A copy of what is substituted; the rest (the task's spec, its
	// retries and timeout) is only read, and shared with the Pipeline.
	pt.Params = slices.Clone(pt.Params)
	pt.When = slices.Clone(pt.When)
	for i := range pt.When {
		pt.When[i].Values = slices.Clone(pt.When[i].Values)
	}
	for i := range pt.Params {
		if pt.Params[i].Value.Type != "" && pt.Params[i].Value.Type != tektonv1.ParamTypeString {
			return pt, fault.Permanent(fmt.Errorf("param %s of type %s: not supported by the embedded executor", pt.Params[i].Name, pt.Params[i].Value.Type))
		}
		s, err := substitute(pt.Params[i].Value.StringVal, v)
		if err != nil {
			return pt, fmt.Errorf("param %s: %w", pt.Params[i].Name, err)
		}
		pt.Params[i].Value.StringVal = s
	}
	for i := range pt.When {
		var err error
		if pt.When[i].Input, err = substitute(pt.When[i].Input, v); err != nil {
			return pt, fmt.Errorf("when: %w", err)
		}
		if err := substituteAll(pt.When[i].Values, v); err != nil {
			return pt, fmt.Errorf("when: %w", err)
		}
	}
	return pt, nil
}

// taskSpec finds the spec of the task pt runs.
func (e *engine) taskSpec(pt tektonv1.PipelineTask) (*tektonv1.TaskSpec, error) {
	switch {
	case pt.TaskSpec != nil:
		return &pt.TaskSpec.TaskSpec, nil
	case pt.TaskRef != nil:
		ts, ok := e.tasks[pt.TaskRef.Name]
		if !ok {
			return nil, fault.Permanent(fmt.Errorf("task %s refers to Task %q, which is not known", pt.Name, pt.TaskRef.Name))
		}
		return ts, nil
	default:
		return nil, fault.Permanent(fmt.Errorf("task %s has neither taskRef nor taskSpec", pt.Name))
	}
}

// runTask runs pt's steps, retrying a failed attempt up to pt.Retries times
// (not a permanent failure: retrying cannot help), each attempt within
// pt.Timeout.
func (e *engine) runTask(ctx context.Context, run string, pt tektonv1.PipelineTask) (TaskOutcome, error) {
	o := TaskOutcome{State: StateFailed}
	ts, err := e.taskSpec(pt)
	if err != nil {
		o.Reason = err.Error()
		return o, err
	}
	given := map[string]string{}
	for _, p := range pt.Params {
		given[p.Name] = p.Value.StringVal
	}
	tparams, err := resolveParams(ts.Params, given, "task "+pt.Name)
	if err != nil {
		o.Reason = err.Error()
		return o, err
	}
	for attempt := 0; attempt <= pt.Retries; attempt++ {
		o.Attempts = attempt + 1
		actx, cancel := ctx, context.CancelFunc(func() {})
		if pt.Timeout != nil && pt.Timeout.Duration > 0 {
			actx, cancel = context.WithTimeout(ctx, pt.Timeout.Duration)
		}
		o.Results, err = e.runSteps(actx, run, pt, ts, tparams, attempt)
		if err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
			// The attempt's own timeout, not the run's: worth a retry.
			err = fmt.Errorf("timed out after %s: %w", pt.Timeout.Duration, context.DeadlineExceeded)
		}
		cancel()
		if err == nil {
			o.State = StateSucceeded
			return o, nil
		}
		o.Reason = err.Error()
		if ctx.Err() != nil || fault.IsPermanent(err) {
			break
		}
	}
	return o, err
}

// runSteps runs the steps of one attempt in order, and returns the task
// results they wrote.
func (e *engine) runSteps(ctx context.Context, run string, pt tektonv1.PipelineTask, ts *tektonv1.TaskSpec, params map[string]string, attempt int) (map[string]string, error) {
	taskRun := run + "-" + pt.Name
	declared := map[string]bool{}
	for _, r := range ts.Results {
		if r.Type != "" && r.Type != tektonv1.ResultsTypeString {
			return nil, fault.Permanent(fmt.Errorf("result %s of type %s: not supported by the embedded executor", r.Name, r.Type))
		}
		declared[r.Name] = true
	}
	taskVars := func(ref string) (string, bool) {
		if k, ok := strings.CutPrefix(ref, "params."); ok {
			v, ok := params[k]
			return v, ok
		}
		if r, ok := strings.CutPrefix(ref, "results."); ok {
			if n, ok := strings.CutSuffix(r, ".path"); ok && declared[n] {
				return pipeline.DefaultResultPath + "/" + n, true
			}
			return "", false
		}
		switch ref {
		case "context.taskRun.name":
			return taskRun, true
		case "context.task.name":
			if pt.TaskRef != nil {
				return pt.TaskRef.Name, true
			}
			return pt.Name, true
		case "context.task.retry-count":
			return strconv.Itoa(attempt), true
		case "context.taskRun.namespace":
			return "", true
		}
		return "", false
	}
	results := map[string]string{}
	for _, s := range ts.Steps {
		if s.Script != "" {
			return results, fault.Permanent(fmt.Errorf("step %s has a script: the embedded executor runs commands only", s.Name))
		}
		// A copy of what is substituted; the rest of the step is only
		// read, and shared with the Task.
		s.Command, s.Args, s.Env = slices.Clone(s.Command), slices.Clone(s.Args), slices.Clone(s.Env)
		if err := substituteAll(s.Command, taskVars); err != nil {
			return results, fmt.Errorf("step %s: %w", s.Name, err)
		}
		if err := substituteAll(s.Args, taskVars); err != nil {
			return results, fmt.Errorf("step %s: %w", s.Name, err)
		}
		for i := range s.Env {
			var err error
			if s.Env[i].Value, err = substitute(s.Env[i].Value, taskVars); err != nil {
				return results, fmt.Errorf("step %s: env %s: %w", s.Name, s.Env[i].Name, err)
			}
		}
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if s.Timeout != nil && s.Timeout.Duration > 0 {
			sctx, cancel = context.WithTimeout(ctx, s.Timeout.Duration)
		}
		res, err := e.step(sctx, stepCall{PipelineTask: pt.Name, TaskRun: taskRun, Attempt: attempt, Step: s})
		cancel()
		for k, v := range res {
			if declared[k] {
				results[k] = v
			}
		}
		if err != nil {
			return results, fmt.Errorf("step %s: %w", s.Name, err)
		}
		if err := ctx.Err(); err != nil {
			return results, err
		}
	}
	return results, nil
}
