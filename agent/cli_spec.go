package agent

import (
	"bytes"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// loadSpecFile reads a node spec for the one-shot commands: a whole
// LatencyNode YAML (kind: LatencyNode), just its spec, or a LatencyProfile
// (its tuning, as the controller would resolve it for a node it alone
// selects). An empty action means Apply.
func loadSpecFile(path string) (v1alpha1.LatencyNodeSpec, error) {
	// The file is the operator's, named on the command line: a path on the
	// machine the command runs on, not under the host root.
	b, err := os.ReadFile(path)
	if err != nil {
		return v1alpha1.LatencyNodeSpec{}, fmt.Errorf("read node spec: %w", err)
	}
	return parseSpec(b)
}

// parseSpec parses what loadSpecFile reads. Unknown fields are refused, so a
// typo does not silently drop a setting.
func parseSpec(b []byte) (v1alpha1.LatencyNodeSpec, error) {
	var probe struct {
		Kind string          `json:"kind"`
		Spec *map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &probe); err != nil {
		return v1alpha1.LatencyNodeSpec{}, fmt.Errorf("parse node spec: %w", err)
	}
	var spec v1alpha1.LatencyNodeSpec
	if probe.Kind != "" || probe.Spec != nil {
		if probe.Kind == "LatencyProfile" {
			return profileSpec(b)
		}
		if probe.Kind != "" && probe.Kind != "LatencyNode" {
			return spec, fmt.Errorf("parse node spec: kind %s, want LatencyNode, LatencyProfile or a bare spec", probe.Kind)
		}
		var ln v1alpha1.LatencyNode
		if err := yaml.UnmarshalStrict(b, &ln); err != nil {
			return spec, fmt.Errorf("parse LatencyNode: %w", err)
		}
		spec = ln.Spec
	} else if err := yaml.UnmarshalStrict(bytes.TrimSpace(b), &spec); err != nil {
		return spec, fmt.Errorf("parse node spec: %w", err)
	}
	if spec.Action == "" {
		spec.Action = v1alpha1.ActionApply
	}
	return spec, nil
}

func profileSpec(b []byte) (v1alpha1.LatencyNodeSpec, error) {
	var lp v1alpha1.LatencyProfile
	if err := yaml.UnmarshalStrict(b, &lp); err != nil {
		return v1alpha1.LatencyNodeSpec{}, fmt.Errorf("parse LatencyProfile: %w", err)
	}
	return v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: lp.Name,
		ProfileGeneration: lp.Generation, Tuning: lp.Spec.TuningSpec}, nil
}
