package window

import (
	"context"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/measure"

	"latencytier.io/latencytier/agent/findings"

	"github.com/go-logr/logr/testr"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
)

// tuning is a TuningSpec with isolated and reserved CPUs ("" leaves one
// unset).
func tuning(isolated, reserved string) v1alpha1.TuningSpec {
	if isolated == "" && reserved == "" {
		return v1alpha1.TuningSpec{}
	}
	c := &v1alpha1.CPUSpec{}
	if isolated != "" {
		c.Isolated = &isolated
	}
	if reserved != "" {
		c.Reserved = &reserved
	}
	return v1alpha1.TuningSpec{CPUs: c}
}

func findingsOf(root *host.Root, in Input) []v1alpha1.Finding {
	return findings.Judge(observe(root, in, classes(in), &measure.Result{}))
}

func findType(fs []v1alpha1.Finding, typ string) *v1alpha1.Finding {
	for i := range fs {
		if fs[i].Type == typ {
			return &fs[i]
		}
	}
	return nil
}

func mustFind(t *testing.T, fs []v1alpha1.Finding, typ string, evidence ...string) {
	t.Helper()
	f := findType(fs, typ)
	if f == nil {
		t.Fatalf("no %s finding in %+v", typ, fs)
	}
	for _, e := range evidence {
		if !strings.Contains(f.Message, e) {
			t.Errorf("%s message %q lacks %q", typ, f.Message, e)
		}
	}
}

func mustNotFind(t *testing.T, fs []v1alpha1.Finding, typ string) {
	t.Helper()
	if f := findType(fs, typ); f != nil {
		t.Fatalf("unexpected %s finding: %s", typ, f.Message)
	}
}

func TestFindingNumaBalancing(t *testing.T) {
	on := testroot.Files(t, map[string]string{"proc/sys/kernel/numa_balancing": "1\n"})
	mustFind(t, findingsOf(on, Input{}), findings.FindingNumaBalancing, "kernel.numa_balancing=1")
	off := testroot.Files(t, map[string]string{"proc/sys/kernel/numa_balancing": "0\n"})
	mustNotFind(t, findingsOf(off, Input{}), findings.FindingNumaBalancing)
}

const interrupts1 = `           CPU0       CPU1       
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 36:        100        200  PCI-MSIX-0000:00:05.0   0-edge      virtio1-req.0
LOC:       5000       6000   Local timer interrupts
ERR:          0
`

const interrupts2 = `           CPU0       CPU1       
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 36:        150        320  PCI-MSIX-0000:00:05.0   0-edge      virtio1-req.0
 41:          0          7  PCI-MSIX-0000:00:04.0   1-edge      virtio0-input.0
LOC:       5100       6900   Local timer interrupts
ERR:          0
`

const softirqs1 = `                    CPU0       CPU1
          HI:          0          0
       TIMER:        100        100
      NET_RX:         10         10
       BLOCK:          5          5
`

const softirqs2 = `                    CPU0       CPU1
          HI:          0          0
       TIMER:        200        900
      NET_RX:         10         42
       BLOCK:          9          5
`

// TestFindingIRQsAndSoftirqsOnIsolated drives the Measurer over two
// snapshots of /proc/interrupts and /proc/softirqs.
func TestFindingIRQsAndSoftirqsOnIsolated(t *testing.T) {
	root := testroot.Files(t, map[string]string{"proc/interrupts": interrupts1, "proc/softirqs": softirqs1})
	m := New(measure.New(root, testr.New(t), measure.WithAttach(measure.AttachNone)))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testroot.Write(t, root.Proc("interrupts"), interrupts2)
	testroot.Write(t, root.Proc("softirqs"), softirqs2)
	res, err := m.Collect(context.Background(), Input{Tuning: tuning("1", "0")})
	if err != nil {
		t.Fatal(err)
	}
	mustFind(t, res.Findings, findings.FindingIRQsIsolated, "127 device interrupts", "irq 36 [virtio1-req.0]: 120", "irq 41 [virtio0-input.0]: 7")
	mustFind(t, res.Findings, findings.FindingSoftirqsIsolated, "NET_RX: 32")
	if f := findType(res.Findings, findings.FindingSoftirqsIsolated); strings.Contains(f.Message, "TIMER") || strings.Contains(f.Message, "BLOCK") {
		t.Errorf("softirq finding counts tick softirqs or CPU0's: %s", f.Message)
	}

	// Nothing new in the next window: no finding.
	res, _ = m.Collect(context.Background(), Input{Tuning: tuning("1", "0")})
	mustNotFind(t, res.Findings, findings.FindingIRQsIsolated)
	mustNotFind(t, res.Findings, findings.FindingSoftirqsIsolated)
}

func TestFindingRunQueueOverloaded(t *testing.T) {
	busy := testroot.Files(t, map[string]string{
		"proc/stat":                     "cpu  1 2 3\nprocs_running 9\nprocs_blocked 0\n",
		"sys/devices/system/cpu/online": "0-1\n",
	})
	mustFind(t, findingsOf(busy, Input{}), findings.FindingRunQueueOverloaded, "stayed at 8 or more", "2 online CPUs")
	calm := testroot.Files(t, map[string]string{
		"proc/stat":                     "procs_running 2\n",
		"sys/devices/system/cpu/online": "0-1\n",
	})
	mustNotFind(t, findingsOf(calm, Input{}), findings.FindingRunQueueOverloaded)
}

func TestFindingCmdlineMissingIsolation(t *testing.T) {
	root := host.New("/")
	cmdline, err := root.ReadString(root.Proc("cmdline"))
	if err != nil || strings.Contains(cmdline, "isolcpus=") {
		t.Skip("this kernel's command line already isolates CPUs")
	}
	mustFind(t, findingsOf(root, Input{Tuning: tuning("1", "0")}), findings.FindingCmdline, "isolcpus=1 nohz_full=1 rcu_nocbs=1")
	mustNotFind(t, findingsOf(root, Input{}), findings.FindingCmdline) // nothing to isolate

	full := testroot.Files(t, map[string]string{"proc/cmdline": "ro isolcpus=managed_irq,1 nohz_full=1 rcu_nocbs=1\n"})
	mustNotFind(t, findingsOf(full, Input{Tuning: tuning("1", "0")}), findings.FindingCmdline)
}

func TestFindingSMTSiblingsSplit(t *testing.T) {
	files := map[string]string{}
	for cpu, sib := range map[string]string{"0": "0,2", "1": "1,3", "2": "0,2", "3": "1,3"} {
		files["sys/devices/system/cpu/cpu"+cpu+"/topology/thread_siblings_list"] = sib + "\n"
	}
	root := testroot.Files(t, files)
	mustFind(t, findingsOf(root, Input{Tuning: tuning("2-3", "0-1")}), findings.FindingSMTSplit, "2 with 0", "3 with 1")
	mustNotFind(t, findingsOf(root, Input{Tuning: tuning("1,3", "0,2")}), findings.FindingSMTSplit)
}

func TestFindingCPUManagerNone(t *testing.T) {
	pods := []podcgroup.Pod{{Namespace: "shop", Name: "api", QOSClass: "Guaranteed"}, {Namespace: "shop", Name: "batch", QOSClass: "BestEffort"}}
	none := testroot.Files(t, map[string]string{"var/lib/kubelet/cpu_manager_state": `{"policyName":"none","defaultCpuSet":"","checksum":1}`})
	mustFind(t, findingsOf(none, Input{Tuning: tuning("1", "0"), Pods: pods}), findings.FindingCPUManagerNone, "shop/api")
	if f := findType(findingsOf(none, Input{Tuning: tuning("1", "0"), Pods: pods}), findings.FindingCPUManagerNone); strings.Contains(f.Message, "batch") {
		t.Errorf("a BestEffort pod is said to expect exclusive CPUs: %s", f.Message)
	}
	static := testroot.Files(t, map[string]string{"var/lib/kubelet/cpu_manager_state": `{"policyName":"static","defaultCpuSet":"0","checksum":1}`})
	mustNotFind(t, findingsOf(static, Input{Tuning: tuning("1", "0"), Pods: pods}), findings.FindingCPUManagerNone)
}
