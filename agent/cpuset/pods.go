package cpuset

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/cpumanager"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/settingid"
)

// PodID is the setting name of a pod's cpuset knob:
// "cpuset/pod/<namespace>/<name>/<uid>", keyed by UID for the reason given at
// cpuquota.PodID.
func PodID(p podcgroup.Pod) string {
	return settingid.Pod(settingid.CPUSetPod, p.Namespace, p.Name, p.UID)
}

// PodKnobs keeps the pods granted the isolated CPUs (Pod.Isolated: they
// opted in from a namespace cpus.namespaceSelector selects; any other pod is
// skipped) on them: cpuset.cpus of the pod cgroup and its containers (v1:
// containers first, as for the slices). When kubelet's CPU manager owns
// placement (static policy) it returns a result per pod saying where kubelet
// put it (Applied within the isolated CPUs, OwnedBy kubelet outside them)
// and writes nothing: the agent does not fight kubelet. An empty
// isolated set yields nothing.
func PodKnobs(root *host.Root, pods []podcgroup.Pod, isolated cpuset.CPUSet, state *cpumanager.State, opts ...podcgroup.Option) ([]knob.Knob, []v1alpha1.SettingResult, error) {
	if isolated.IsEmpty() {
		return nil, nil, nil
	}
	var knobs []knob.Knob
	var results []v1alpha1.SettingResult
	for _, p := range pods {
		if !p.Isolated {
			continue
		}
		if state.OwnsPlacement() {
			results = append(results, kubeletPlacement(p, isolated, state))
			continue
		}
		k, res, err := podKnobs(root, p, isolated, opts)
		if err != nil {
			return nil, nil, err
		}
		knobs = append(knobs, k...)
		results = append(results, res...)
	}
	return knobs, results, nil
}

// kubeletPlacement reports a pod whose CPUs kubelet's CPU manager places.
func kubeletPlacement(p podcgroup.Pod, isolated cpuset.CPUSet, s *cpumanager.State) v1alpha1.SettingResult {
	r := v1alpha1.SettingResult{Setting: PodID(p), Desired: isolated.String()}
	cpus, exclusive := s.PodCPUs(p.UID)
	what := "exclusive CPUs"
	if !exclusive {
		cpus, what = s.DefaultCPUSet, "the shared pool (defaultCpuSet)"
	}
	r.Actual = cpus.String()
	if !cpus.IsEmpty() && cpus.IsSubsetOf(isolated) {
		r.State = v1alpha1.SettingApplied
		r.Message = fmt.Sprintf("kubelet's %s CPU manager placed the pod on %s %s, within the isolated CPUs; left to kubelet (read %s)", s.PolicyName, what, cpus, s.Origin())
		return r
	}
	r.State, r.Owner = v1alpha1.SettingOwnedBy, KubeletOwner(s)
	r.Message = fmt.Sprintf("kubelet's %s CPU manager owns placement and keeps the pod on %s %s, outside the isolated CPUs %s; the agent does not override kubelet (give the pod Guaranteed QoS with integer CPUs and set kubelet reservedSystemCPUs to the reserved CPUs; read %s)", s.PolicyName, what, cpus, isolated, s.Origin())
	return r
}

// KubeletOwner names kubelet's CPU manager as the owner of placement
// (state OwnedBy), as agent/owners does.
func KubeletOwner(s *cpumanager.State) string {
	return fmt.Sprintf("kubelet CPU manager (%s)", s.PolicyName)
}

func podKnobs(root *host.Root, p podcgroup.Pod, isolated cpuset.CPUSet, opts []podcgroup.Option) ([]knob.Knob, []v1alpha1.SettingResult, error) {
	id := PodID(p)
	dirs, err := podcgroup.FindIn(root, "cpuset", p.UID, opts...)
	if errors.Is(err, podcgroup.ErrNotFound) {
		return nil, []v1alpha1.SettingResult{{Setting: id, Desired: isolated.String(), State: v1alpha1.SettingFailed,
			Message: fmt.Sprintf("no cpuset cgroup for pod uid %s (searched cgroupfs and systemd layouts, all QoS classes)", p.UID)}}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("finding the cpuset cgroup of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	if !root.Exists(filepath.Join(dirs.Pod, CPUsFile)) {
		return nil, []v1alpha1.SettingResult{{Setting: id, Desired: isolated.String(), State: v1alpha1.SettingUnsupported,
			Message: fmt.Sprintf("the cpuset controller is not enabled for the pod cgroup %s", dirs.Pod)}}, nil
	}
	if dirs.Version == 2 {
		return v2PodKnobs(id, dirs, isolated), nil, nil
	}
	base, rel := filepath.Dir(dirs.Pod), filepath.Base(dirs.Pod)
	k, err := confineV1(root, base, rel, podIDs(id, rel), isolated)
	if err != nil {
		return nil, []v1alpha1.SettingResult{{Setting: id, Desired: isolated.String(), State: v1alpha1.SettingFailed, Message: err.Error()}}, nil
	}
	return k, nil, nil
}

// v2PodKnobs sets the pod and then each container that has cpuset.cpus;
// v2 clamps children to their parent, so order only matters for clarity.
func v2PodKnobs(id string, dirs *podcgroup.Dirs, isolated cpuset.CPUSet) []knob.Knob {
	k := []knob.Knob{{ID: id, Path: filepath.Join(dirs.Pod, CPUsFile), Access: Access, Desired: isolated.String(), Equal: cpulist.Equal}}
	for _, c := range dirs.Containers {
		k = append(k, knob.Knob{ID: id + "/" + podcgroup.Key(c),
			Path: filepath.Join(c, CPUsFile), Access: Access, Desired: isolated.String(), Equal: cpulist.Equal})
	}
	return k
}

// podIDs names a pod's knobs: the pod itself, then its containers by short ID.
func podIDs(podID, podRel string) func(rel string) string {
	return func(rel string) string {
		parts := strings.Split(strings.TrimPrefix(rel, podRel), string(filepath.Separator))
		id := podID
		for _, part := range parts {
			if part != "" {
				id += "/" + podcgroup.Key(part)
			}
		}
		return id
	}
}
