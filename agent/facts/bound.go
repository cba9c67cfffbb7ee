package facts

import (
	"sort"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/internal/bound"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Bound fits facts into the LatencyNode CRD's limits, so a big host (a
// 2x192-core SMT machine has 384 SMT groups) or a long kernel command line
// never gets its status rejected. CPU lists are written in range form; SMT
// groups beyond the item limit are summarised (see summariseSMT); what still
// does not fit is cut with a marker. Decisions (RebootRequired) use the
// facts as read, not these.
func Bound(f v1alpha1.KernelFacts) v1alpha1.KernelFacts {
	f.Version = bound.String(f.Version, bound.Version)
	f.OnlineCPUs = bound.String(rangeForm(f.OnlineCPUs), bound.OnlineCPUs)
	if len(f.SMTSiblings) > bound.SMTGroups {
		f.SMTSiblings = summariseSMT(f.SMTSiblings)
	}
	f.SMTSiblings = bound.Strings(f.SMTSiblings, bound.SMTGroups, bound.SMTGroup)
	flags := make([]string, len(f.CmdlineIsolation))
	for i, fl := range f.CmdlineIsolation {
		flags[i] = cutList(flagRangeForm(fl), bound.CmdlineFlag)
	}
	f.CmdlineIsolation = bound.Strings(flags, bound.CmdlineFlags, bound.CmdlineFlag)
	return f
}

// cutList cuts a long list after its last whole item that fits in n
// characters, ending in ",..." ("nohz_full=1,3,5,..."), not inside a number.
func cutList(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if i := strings.LastIndexByte(s[:n-len(bound.Marker)], ','); i > 0 {
		return s[:i+1] + bound.Marker
	}
	return s
}

// rangeForm rewrites a cpulist in its shortest range form ("0,1,2,5" →
// "0-2,5"); anything that is not a cpulist is returned unchanged.
func rangeForm(list string) string {
	set, err := cpuset.Parse(list)
	if err != nil {
		return list
	}
	return set.String()
}

// flagRangeForm rewrites the CPU list of an isolation flag in range form,
// keeping isolcpus's leading options: "nohz_full=2,3,4" → "nohz_full=2-4".
func flagRangeForm(flag string) string {
	name, value, ok := strings.Cut(flag, "=")
	if !ok {
		return flag
	}
	parts := strings.Split(value, ",")
	i := 0
	for i < len(parts) && parts[i] != "" && strings.Trim(parts[i], "0123456789-") != "" {
		i++ // isolcpus options: managed_irq, domain, nohz
	}
	cpus := strings.Join(parts[i:], ",")
	if cpus == "" {
		return flag
	}
	if r := rangeForm(cpus); r != cpus {
		return name + "=" + strings.Join(append(parts[:i:i], r), ",")
	}
	return flag
}

// summariseSMT describes SMT groups by their shape: groups whose siblings
// sit at the same offsets from their first thread become one item,
// "<first threads>+<offsets>". "0-383+384" says threads c and c+384 share a
// core for every c in 0-383; "0,2,4+1" says 0-1, 2-3 and 4-5 do. An item
// longer than the item limit is split into several with the same offsets.
// Items are ordered by their first thread.
func summariseSMT(groups []string) []string {
	firsts := map[string][]int{} // offsets → first threads
	var order []string
	lowest := map[string]int{}
	for _, g := range groups {
		set, err := cpuset.Parse(g)
		if err != nil || set.Size() < 2 {
			continue
		}
		cpus := set.List()
		var key strings.Builder
		for _, c := range cpus[1:] {
			key.WriteString("+" + strconv.Itoa(c-cpus[0]))
		}
		k := key.String()
		if _, ok := firsts[k]; !ok {
			order = append(order, k)
			lowest[k] = cpus[0]
		}
		firsts[k] = append(firsts[k], cpus[0])
		lowest[k] = min(lowest[k], cpus[0])
	}
	sort.Slice(order, func(i, j int) bool { return lowest[order[i]] < lowest[order[j]] })
	var out []string
	for _, k := range order {
		out = append(out, chunks(cpuset.New(firsts[k]...).String(), k, bound.SMTGroup)...)
	}
	return out
}

// chunks splits a range-form cpulist at its commas into items of at most
// n characters, each ending in suffix.
func chunks(list, suffix string, n int) []string {
	var out []string
	cur := ""
	for _, part := range strings.Split(list, ",") {
		next := part
		if cur != "" {
			next = cur + "," + part
		}
		if cur != "" && len(next)+len(suffix) > n {
			out = append(out, cur+suffix)
			next = part
		}
		cur = next
	}
	if cur != "" {
		out = append(out, cur+suffix)
	}
	return out
}
