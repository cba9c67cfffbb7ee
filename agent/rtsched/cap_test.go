package rtsched

import (
	"fmt"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Thread knobs are bounded per node, not only per pod: a pod that would
// pass the bound gets what is left, and a Refused result (the tenants'
// pods and threads made the count, so it is the pod's, not a node
// failure) says how many of its threads were left out.
func TestNodeCap(t *testing.T) {
	g := Grant{Pod: podcgroup.Pod{Namespace: "ns", Name: "p", UID: "u"}, Value: "fifo:50"}
	knobs := func(n int) []knob.Knob {
		out := make([]knob.Knob, n)
		for i := range out {
			out[i] = knob.Knob{ID: fmt.Sprint(i)}
		}
		return out
	}
	for _, c := range []struct {
		have, n, kept int
		msg           string
	}{
		{have: 0, n: 3, kept: 3},
		{have: 2, n: 3, kept: 3},
		{have: 3, n: 3, kept: 2, msg: "bound of 5 threads: 2 of this pod's 3 threads get fifo:50, 1 are left"},
		{have: 5, n: 2, kept: 0, msg: "0 of this pod's 2 threads"},
		{have: 9, n: 1, kept: 0, msg: "0 of this pod's 1 threads"},
	} {
		k, no := nodeCap(c.have, 5, g, knobs(c.n))
		if len(k) != c.kept {
			t.Errorf("have %d + %d: kept %d, want %d", c.have, c.n, len(k), c.kept)
		}
		if c.msg == "" {
			if len(no) != 0 {
				t.Errorf("have %d + %d: refusals %+v, want none", c.have, c.n, no)
			}
			continue
		}
		if len(no) != 1 || no[0].Cause != CauseNodeThreads {
			t.Fatalf("have %d + %d: refusals %+v, want one by %s", c.have, c.n, no, CauseNodeThreads)
		}
		if r := no[0].Result; r.State != v1alpha1.SettingRefused || r.Setting != "rtsched/ns/p/u/node-threads" || !strings.Contains(r.Message, c.msg) {
			t.Errorf("have %d + %d: result %+v, want Refused saying %q", c.have, c.n, r, c.msg)
		}
	}
}
