package resources

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/resources/v1alpha1"
)

// ConvertWavePolicy is a WavePolicy resource's waves, policy and freeze
// windows: its spec decoded strictly (a field the API does not know is an
// error, as in the file).
func ConvertWavePolicy(u *unstructured.Unstructured) (config.Waves, error) {
	raw, err := json.Marshal(u.Object["spec"])
	if err != nil {
		return config.Waves{}, fmt.Errorf("spec: %w", err)
	}
	var spec v1alpha1.WavePolicySpec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return config.Waves{}, fmt.Errorf("spec: %w", err)
	}
	if len(spec.Waves) == 0 {
		return config.Waves{}, fmt.Errorf("spec.waves: at least one wave is required")
	}
	return config.Waves{Waves: spec.Waves, WavePolicy: spec.WavePolicy, FreezeWindows: spec.FreezeWindows}, nil
}

// wavesProblem tells whether the validator's problem p is the waves' (a
// WavePolicy in force gives them), and its path in the resource: a
// problem of fleet.waves, fleet.wavePolicy or fleet.freezeWindows, or a
// cluster the waves leave out.
func wavesProblem(p config.Problem) (string, bool) {
	for _, f := range []string{"waves", "wavePolicy", "freezeWindows"} {
		if rest, ok := strings.CutPrefix(p.Path, "fleet."+f); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			return "spec." + f + rest, true
		}
	}
	if strings.HasPrefix(p.Path, "fleet.clusters[") && strings.Contains(p.Message, "is in no wave") {
		return "spec.waves", true
	}
	return "", false
}
