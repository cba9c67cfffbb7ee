package desired

import (
	"fmt"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/rtsched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Event reasons for a pod whose real-time request is not granted or does
// not parse.
const (
	ReasonRealtimeRefused = "RealtimeOptInRefused"
	ReasonRealtimeInvalid = "RealtimeOptInInvalid"
)

const realtimeGrant = "realtime.namespaceSelector"

// realtime grants the pods that ask (annotation latencytier.io/sched-policy)
// what the profile's realtime field allows and renders their threads'
// knobs (agent/rtsched); every other asking pod is a Refusal.
func (s *State) realtime(root *host.Root, t v1alpha1.TuningSpec, pods []podcgroup.Pod) {
	var grants []rtsched.Grant
	isolated := s.cpus.Isolated // empty when unset or not a cpulist
	for _, p := range pods {
		ask, ok := p.Annotations[v1alpha1.SchedPolicyAnnotation]
		if !ok {
			continue
		}
		id := rtsched.PodID(p)
		if t.Realtime == nil || !podcgroup.Granted(p.NamespaceLabels, t.Realtime.NamespaceSelector) {
			var sel *v1alpha1.NamespaceSelector
			if t.Realtime != nil {
				sel = t.Realtime.NamespaceSelector
			}
			s.refuse(refusal(p, id, realtimeGrant, sel, ReasonRealtimeRefused, "real-time scheduling ("+ask+")", "its threads keep their policy"))
			continue
		}
		v, no := rtsched.Check(t, ask)
		if no != nil {
			// Refused even when the annotation is malformed: it is the pod
			// owner's, and must not make the node PartiallyApplied.
			r := Refusal{Pod: p, Field: no.Field, Reason: ReasonRealtimeRefused, Result: v1alpha1.SettingResult{Setting: id,
				Desired: ask, State: v1alpha1.SettingRefused,
				Message: fmt.Sprintf("pod %s/%s asked for real-time scheduling, refused: %s; its threads keep their policy", p.Namespace, p.Name, no.Message)}}
			if no.Invalid {
				r.Reason = ReasonRealtimeInvalid
			}
			s.refuse(r)
			continue
		}
		if s.sizing != nil {
			s.refuse(Refusal{Pod: p, Field: rtsched.FieldIsolated, Reason: ReasonRealtimeRefused, Result: v1alpha1.SettingResult{Setting: id,
				Desired: ask, State: v1alpha1.SettingRefused,
				Message: fmt.Sprintf("pod %s/%s asked for real-time scheduling, refused: spec.cpus is Invalid on this node (%s); its threads keep their policy", p.Namespace, p.Name, s.sizing.Setting)}})
			continue
		}
		grants = append(grants, rtsched.Grant{Pod: p, Value: v.String(), CPUs: isolated})
	}
	k, r, no, err := rtsched.Knobs(root, grants)
	s.addPerPod("rtsched", v1alpha1.SettingUnsupported, k, r, err)
	for _, n := range no {
		s.refuse(Refusal{Pod: n.Pod, Field: n.Cause, Reason: ReasonRealtimeRefused, Result: n.Result})
	}
}

func (s *State) refuse(r Refusal) {
	s.Refusals = append(s.Refusals, r)
	s.Results = append(s.Results, r.Result)
}
