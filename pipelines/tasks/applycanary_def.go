package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// Names of the apply-canary task's params and results.
const (
	ParamRollout   = "rollout"
	ParamNamespace = "namespace"
	ParamKind      = "kind"
	ParamWorkload  = "workload"
	ParamContainer = "container"
	ParamImage     = "image"
	ParamCanary    = "canary"
	ParamObjects   = "objects"
	ParamRestart   = "restart"

	ResultPreviousImage = "previous-image"
	ResultChanged       = "changed"
	// ResultPreviousMembers, of a release set of image members' run, is
	// what each member the run set ran before (its primary's image), a
	// JSON object by member: the cluster's previous version, what its
	// revert restores. "" for an application's run.
	ResultPreviousMembers = "previous-members"
)

var applyCanaryDef = Def{
	Name:  "apply-canary",
	Short: "Apply a Flagger Canary (and what it refers to) and set the workload's image in one cluster",
	Params: []Param{
		{Name: ParamRollout, Required: true, Usage: "rollout id"},
		{Name: ParamNamespace, Default: "default", Usage: "namespace of the workload"},
		{Name: ParamKind, Default: "Deployment", Usage: "kind of the workload: Deployment or DaemonSet"},
		{Name: ParamWorkload, Required: true, Usage: "name of the workload"},
		{Name: ParamContainer, Usage: "container to set the image of (default: the first)"},
		{Name: ParamImage, Required: true, Usage: "image to set, repo@digest"},
		{Name: ParamCanary, Required: true, Usage: "the Flagger Canary, JSON (or YAML); its namespace defaults to --namespace"},
		{Name: ParamObjects, Usage: "objects the canary refers to (MetricTemplates, an autoscaler, a load tester), a JSON (or YAML) list"},
		{Name: ParamRestart, Usage: "a token set on the pod template (annotation " + AnnotationRestart + ") so Flagger analyses the same image again: a retry"},
		{Name: ParamMembers, Usage: "a release set of image members: its members, a JSON list applied in this order, each with its image and canary, each waited for until its primary runs it (--workload is the lead's)"},
	},
	Results: []string{ResultPreviousImage, ResultChanged, ResultPreviousMembers},
	Cluster: true,
	Run:     runApplyCanary,
}

func runApplyCanary(ctx context.Context, env Env, p Params) (Results, error) {
	ap, err := ApplyCanaryParamsFrom(p)
	if err != nil {
		return nil, err
	}
	cfg, err := env.Cluster()
	if err != nil {
		return nil, err
	}
	apply := ApplyCanary
	if len(ap.Members) > 0 {
		apply = func(ctx context.Context, cfg *rest.Config, ap ApplyCanaryParams) (ApplyCanaryResult, error) {
			return ApplyImageSet(ctx, cfg, ap, ap.Members)
		}
	}
	res, err := apply(ctx, cfg, ap)
	if err != nil {
		return nil, err
	}
	members, err := EncodePreviousMembers(res.PreviousMembers)
	if err != nil {
		return nil, err
	}
	return Results{ResultPreviousImage: res.PreviousImage, ResultChanged: strconv.FormatBool(res.Changed), ResultPreviousMembers: members}, nil
}

// EncodePreviousMembers is ResultPreviousMembers of m: "" for none.
func EncodePreviousMembers(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encoding %s: %w", ResultPreviousMembers, err)
	}
	return string(b), nil
}

// DecodePreviousMembers reads ResultPreviousMembers: nil for "".
func DecodePreviousMembers(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fault.Permanent(fmt.Errorf("result %s = %q: %w", ResultPreviousMembers, s, err))
	}
	return m, nil
}

// ApplyCanaryParamsFrom decodes the apply-canary task's params.
func ApplyCanaryParamsFrom(p Params) (ApplyCanaryParams, error) {
	ap := ApplyCanaryParams{
		Rollout: p[ParamRollout], Namespace: p[ParamNamespace], Kind: p[ParamKind],
		Workload: p[ParamWorkload], Container: p[ParamContainer], Image: p[ParamImage],
		Restart: p[ParamRestart],
	}
	if ap.Namespace == "" {
		ap.Namespace = "default"
	}
	var c flaggerv1.Canary
	if err := decodeStrict(p[ParamCanary], &c); err != nil {
		return ap, fault.Permanent(fmt.Errorf("decoding the canary: %w", err))
	}
	if c.Name == "" {
		return ap, fault.Permanent(fmt.Errorf("decoding the canary: it has no name"))
	}
	if c.Namespace == "" {
		c.Namespace = ap.Namespace
	}
	ap.Canary = &c
	members, err := decodeMembers(p[ParamMembers])
	if err != nil {
		return ap, err
	}
	ap.Members = members
	if p[ParamObjects] != "" {
		// As JSON with integers kept int64, as the API machinery expects.
		b := []byte(p[ParamObjects])
		var err error
		if !isJSON(p[ParamObjects]) {
			b, err = yaml.YAMLToJSON(b)
		}
		var objs []any
		if err == nil {
			err = utiljson.Unmarshal(b, &objs)
		}
		if err != nil {
			return ap, fault.Permanent(fmt.Errorf("decoding the objects: %w", err))
		}
		for i, v := range objs {
			o, ok := v.(map[string]any)
			if !ok {
				return ap, fault.Permanent(fmt.Errorf("decoding the objects: object %d is not a JSON object", i+1))
			}
			u := &unstructured.Unstructured{Object: o}
			if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
				return ap, fault.Permanent(fmt.Errorf("decoding the objects: object %d has no apiVersion, kind or name", i+1))
			}
			ap.Objects = append(ap.Objects, u)
		}
	}
	return ap, nil
}

// canaryParam is a Canary as the canary param carries it: without its
// status. Encoded from the typed object, not through an unstructured map:
// each run of a wave encodes one (the map was a quarter of the embedded
// executor's allocations). The nulls Go's types write for unset fields
// stay (the task decodes them into the same types; its apply drops them).
type canaryParam struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              flaggerv1.CanarySpec `json:"spec"`
}

// ParamsOf encodes p as the apply-canary task's params.
func (p ApplyCanaryParams) ParamsOf() (Params, error) {
	canaryJSON := ""
	if p.Canary != nil {
		b, err := json.Marshal(canaryParam{
			TypeMeta:   metav1.TypeMeta{APIVersion: flaggerv1.SchemeGroupVersion.String(), Kind: flaggerv1.CanaryKind},
			ObjectMeta: p.Canary.ObjectMeta,
			Spec:       p.Canary.Spec,
		})
		if err != nil {
			return nil, fmt.Errorf("encoding the canary: %w", err)
		}
		canaryJSON = string(b)
	}
	objects := ""
	if len(p.Objects) > 0 {
		b, err := json.Marshal(p.Objects)
		if err != nil {
			return nil, fmt.Errorf("encoding the canary's objects: %w", err)
		}
		objects = string(b)
	}
	members, err := EncodeMembers(p.Members)
	if err != nil {
		return nil, err
	}
	return Params{
		ParamRollout: p.Rollout, ParamNamespace: p.Namespace, ParamKind: p.Kind, ParamWorkload: p.Workload,
		ParamContainer: p.Container, ParamImage: p.Image, ParamCanary: canaryJSON, ParamObjects: objects,
		ParamRestart: p.Restart, ParamMembers: members,
	}, nil
}

// isJSON tells JSON (what the pipelines pass) from YAML (what a person may
// pass): JSON is decoded without the YAML round trip.
func isJSON(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")
}

// decodeStrict decodes JSON or YAML into v, refusing unknown fields.
func decodeStrict(s string, v any) error {
	if !isJSON(s) {
		return yaml.UnmarshalStrict([]byte(s), v)
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("unexpected data after the object")
	}
	return nil
}
