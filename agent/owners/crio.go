package owners

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/internal/settingid"
)

// CRI-O's high-performance hooks act on these pod annotations, for pods of
// a runtime handler whose allowed_annotations lists them.
const (
	CRIOCPUQuota         = "cpu-quota.crio.io"
	CRIOIRQLoadBalancing = "irq-load-balancing.crio.io"
)

const crioInstead = "CRI-O's high-performance hooks do it for this pod (the annotation and the runtime handler's allowed_annotations); drop the annotation to let the LatencyProfile tune it, or keep it and leave the setting out of the profile"

// crio records CRI-O's high-performance hooks for the pods that ask them
// through an annotation its configuration allows: cpu-quota.crio.io
// "disable" owns the pod's CFS quota and burst, irq-load-balancing.crio.io
// "disable" owns IRQ affinity (CRI-O rewrites every IRQ's mask and
// irqbalance's banned CPUs when the pod starts and stops). The annotations
// are the pod's own, but CRI-O acts on them whatever the agent trusts, and
// they can only make the agent write less.
func (s *Set) crio(root *host.Root, pods []podcgroup.Pod, pid int) {
	allowed, err := crioAllowed(root)
	if err != nil {
		s.Errs = append(s.Errs, err)
	}
	o := Owner{Kind: CRIOHooks, Name: fmt.Sprintf("CRI-O high-performance hooks (crio pid %d)", pid), Instead: crioInstead}
	irq := ""
	for _, p := range pods {
		if allowed[CRIOCPUQuota] && p.Annotations[CRIOCPUQuota] == "disable" {
			s.Claims = append(s.Claims, Claim{Owner: o, Why: fmt.Sprintf("pod %s/%s has %s: disable", p.Namespace, p.Name, CRIOCPUQuota),
				Scopes: []string{settingid.Pod(settingid.CPUQuota, p.Namespace, p.Name, p.UID), settingid.Pod(settingid.CPUBurst, p.Namespace, p.Name, p.UID)}})
		}
		if allowed[CRIOIRQLoadBalancing] && p.Annotations[CRIOIRQLoadBalancing] == "disable" && irq == "" {
			irq = p.Namespace + "/" + p.Name
		}
	}
	if irq != "" {
		s.Claims = append(s.Claims, Claim{Owner: o, Scopes: []string{settingid.IRQ.Name},
			Why: fmt.Sprintf("pod %s has %s: disable, and CRI-O rewrites every IRQ's affinity for it", irq, CRIOIRQLoadBalancing)})
	}
	if len(allowed) > 0 {
		s.Running = append(s.Running, o)
	}
}

// crioAllowed reads CRI-O's configuration (crio.conf and the crio.conf.d
// drop-ins, in name order) and reports which hook annotations an
// allowed_annotations line names, outside comments.
func crioAllowed(root *host.Root) (map[string]bool, error) {
	files := []string{root.Path("etc", "crio", "crio.conf")}
	dropins := root.Path("etc", "crio", "crio.conf.d")
	entries, err := root.ReadDir(dropins)
	var errs []error
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("listing %s: %w", dropins, err))
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".conf") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) > maxConfigs {
		errs = append(errs, fmt.Errorf("%s: more than %d drop-ins; the rest not read", dropins, maxConfigs))
		names = names[:maxConfigs]
	}
	for _, n := range names {
		files = append(files, filepath.Join(dropins, n))
	}
	allowed := map[string]bool{}
	for _, f := range files {
		text, err := readBounded(f, maxConfigFile)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		inList := false
		for _, line := range strings.Split(text, "\n") {
			line, _, _ = strings.Cut(line, "#")
			if strings.Contains(line, "allowed_annotations") {
				inList = true
			}
			if !inList {
				continue
			}
			for _, a := range []string{CRIOCPUQuota, CRIOIRQLoadBalancing} {
				if strings.Contains(line, `"`+a+`"`) {
					allowed[a] = true
				}
			}
			if strings.Contains(line, "]") {
				inList = false
			}
		}
	}
	return allowed, errors.Join(errs...)
}
