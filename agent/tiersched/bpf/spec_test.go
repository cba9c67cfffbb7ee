package bpf

import (
	"bytes"
	"encoding/binary"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// Every callback is a struct_ops program bound to its sched_ext_ops
// member, including the no-op hotplug ones (without them the kernel exits
// the scheduler on any CPU hotplug).
func TestProgramsAttachToTheirOpsMembers(t *testing.T) {
	for _, insert := range InsertKfuncs {
		t.Run(insert, func(t *testing.T) { testOpsMembers(t, insert) })
	}
}

func testOpsMembers(t *testing.T, insert string) {
	spec, err := Spec(Options{}, insert)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"select_cpu", "enqueue", "running", "stopping", "cpu_online", "cpu_offline", "exit"}
	var got []string
	for name, ps := range spec.Programs {
		if ps.Type != ebpf.StructOps {
			t.Errorf("program %s is %s, not struct_ops", name, ps.Type)
		}
		member, ok := strings.CutPrefix(ps.AttachTo, StructOps+":")
		if !ok {
			t.Errorf("program %s attaches to %q", name, ps.AttachTo)
		}
		got = append(got, member)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ops members %v, want %v", got, want)
	}
	if ms := spec.Maps["tier_ops"]; ms == nil || ms.Type != ebpf.StructOpsMap {
		t.Fatalf("tier_ops is %+v, want a struct_ops map", ms)
	}
}

// The program calls only kfuncs whose prototype is the same on every
// kernel the agent accepts: cilium/ebpf links kfuncs by exact name and
// refuses a differing prototype, so one more kfunc is one more kernel
// where the scheduler does not load. Adding one means checking it in the
// kernels' BTF_ID_FLAGS lists and adding it here.
func TestOnlyStableKfuncs(t *testing.T) {
	for _, insert := range InsertKfuncs {
		t.Run(insert, func(t *testing.T) { testKfuncs(t, insert) })
	}
}

func testKfuncs(t *testing.T, insert string) {
	spec, err := objects[insert]()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for typ, err := range spec.Types.All() {
		if err != nil {
			t.Fatal(err)
		}
		if fn, ok := typ.(*btf.Func); ok && fn.Linkage == btf.ExternFunc {
			got = append(got, fn.Name)
		}
	}
	want := append(slices.Clone(Kfuncs), insert)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("extern functions %v, want exactly %v", got, want)
	}
}

func TestSpecSetsTunablesAndTimeout(t *testing.T) {
	spec, err := Spec(Options{TierSlice: 500 * time.Microsecond, BudgetPct: 80, Timeout: 5 * time.Second}, InsertKfuncs[0])
	if err != nil {
		t.Fatal(err)
	}
	var slice uint64
	if err := spec.Variables["tier_slice_ns"].Get(&slice); err != nil || slice != 500000 {
		t.Errorf("tier_slice_ns %d (%v), want 500000", slice, err)
	}
	var fair uint64
	if err := spec.Variables["fair_slice_ns"].Get(&fair); err != nil || fair != 5000000 {
		t.Errorf("fair_slice_ns %d (%v), want the 5 ms default", fair, err)
	}
	var test bool
	if err := spec.Variables["test_controls"].Get(&test); err != nil || test {
		t.Errorf("test_controls %v (%v): the agent's options must never arm it", test, err)
	}
	if got := opsMember(t, spec, "timeout_ms"); got != 5000 {
		t.Errorf("timeout_ms %d, want 5000", got)
	}
	if got := opsMember(t, spec, "flags"); got != 0 {
		t.Errorf("flags %#x, want 0 (every normal task; partial mode would put ext below fair)", got)
	}
	name := opsBytes(t, spec, "name")
	if got := string(name[:strings.IndexByte(string(name), 0)]); got != OpsName {
		t.Errorf("ops name %q, want %q", got, OpsName)
	}
	// A fresh spec is not changed by an earlier one's options.
	again, err := Spec(Options{}, InsertKfuncs[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := opsMember(t, again, "timeout_ms"); got != 0 {
		t.Errorf("default timeout_ms %d, want 0 (the kernel's maximum)", got)
	}
}

func opsBytes(t *testing.T, spec *ebpf.CollectionSpec, member string) []byte {
	t.Helper()
	ms := spec.Maps["tier_ops"]
	st := ms.Value.(*btf.Struct)
	data := ms.Contents[0].Value.([]byte)
	for _, m := range st.Members {
		if m.Name == member {
			size, err := btf.Sizeof(m.Type)
			if err != nil {
				t.Fatal(err)
			}
			off := int(m.Offset.Bytes())
			return data[off : off+size]
		}
	}
	t.Fatalf("no member %s", member)
	return nil
}

func opsMember(t *testing.T, spec *ebpf.CollectionSpec, member string) uint64 {
	b := opsBytes(t, spec, member)
	switch len(b) {
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	case 8:
		return binary.LittleEndian.Uint64(b)
	}
	t.Fatalf("member %s has %d bytes", member, len(b))
	return 0
}

func TestOptionsOutOfRange(t *testing.T) {
	for _, o := range []Options{
		{TierSlice: time.Microsecond},
		{FairSlice: time.Second},
		{BudgetPct: 101},
		{Timeout: 31 * time.Second},
		{Timeout: 1500 * time.Microsecond},
		{Timeout: -time.Second},
	} {
		if _, err := Spec(o, InsertKfuncs[1]); err == nil {
			t.Errorf("Spec(%+v) accepted", o)
		}
	}
}

// The stall control is compiled only into privileged (test) builds; the
// agent binary is built without tags.
func TestAgentBinaryHasNoTestControls(t *testing.T) {
	files := func(tags ...string) []string {
		args := append([]string{"list"}, tags...)
		out, err := exec.Command("go", append(args, "-f", "{{.GoFiles}}", ".")...).Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		return strings.Fields(strings.Trim(strings.TrimSpace(string(out)), "[]"))
	}
	if slices.Contains(files(), "testcontrols_privileged.go") {
		t.Error("the stall control is part of the untagged (agent) build")
	}
	if !slices.Contains(files("-tags", "privileged"), "testcontrols_privileged.go") {
		t.Error("the stall control is missing from the privileged (test) build")
	}
}

// kernelBTF is a BTF spec holding functions of these names.
func kernelBTF(t *testing.T, names ...string) *btf.Spec {
	t.Helper()
	b, err := btf.NewBuilder(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := b.Add(&btf.Func{Name: n, Type: &btf.FuncProto{Return: (*btf.Void)(nil)}, Linkage: btf.GlobalFunc}); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// Debian's 7.3.4 BTF has scx_bpf_dsq_insert, scx_bpf_dsq_insert___v2 and
// scx_bpf_dsq_insert___v2_impl, all of one essential name; cilium/ebpf
// v0.22.0 then finds "multiple matching types" for the first (the object
// calling it failed to load there), so that kernel gets the ___v2 object.
// A kernel with only an _impl of v2 must not count as having v2.
func TestInsertKfuncOfEachKernel(t *testing.T) {
	tests := []struct {
		names []string
		want  string
	}{
		{[]string{"scx_bpf_dsq_insert", "scx_bpf_dsq_insert___v2", "scx_bpf_dsq_insert___v2_impl", "scx_bpf_dsq_insert_impl"}, "scx_bpf_dsq_insert___v2"},
		{[]string{"scx_bpf_dsq_insert", "scx_bpf_dsq_insert_vtime"}, "scx_bpf_dsq_insert"},
		{[]string{"scx_bpf_dsq_insert", "scx_bpf_dsq_insert___v2_impl"}, "scx_bpf_dsq_insert"},
		{[]string{"scx_bpf_dispatch", "scx_bpf_consume"}, ""},
	}
	for _, tt := range tests {
		if got := InsertKfunc(kernelBTF(t, tt.names...)); got != tt.want {
			t.Errorf("kernel with %v: %q, want %q", tt.names, got, tt.want)
		}
	}
}
