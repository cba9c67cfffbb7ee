//go:build privileged

package window

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"latencytier.io/latencytier/agent/measure"

	"latencytier.io/latencytier/agent/findings"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"latencytier.io/latencytier/agent/host"
)

// pidnsChild, when set, makes TestProcessReadsNeedNoHostPID the child: it
// runs in pid and mount namespaces of its own, like the agent's container
// without hostPID, and measures through the host root named by the value.
const pidnsChild = "LT_PIDNS_CHILD"

// pidnsBinDir, in the child, is a directory the child bind-mounts over the
// host root's /usr/local/sbin (in its private mount namespace only), so the
// irqbalance copy in it is the host root's irqbalance binary there: the
// agent identifies irqbalance by its executable, not its name.
const pidnsBinDir = "LT_PIDNS_BIN_DIR"

// TestProcessReadsNeedNoHostPID backs the DaemonSet's decision to drop
// hostPID (controllers/daemonset.go): the agent, in a pid namespace of its
// own with its own /proc, still sees every task of the host through the
// host root's /proc (the host's procfs, bind-mounted with "/"). A SCHED_FIFO
// task and an irqbalance started outside the namespace are found and named
// by their host pids, and the schedstat fallback measures host tasks. The
// control run, reading the namespace's own /proc instead, finds neither.
func TestProcessReadsNeedNoHostPID(t *testing.T) {
	if dir := os.Getenv(pidnsChild); dir != "" {
		runPidnsChild(t, dir)
		return
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root: new pid and mount namespaces, a SCHED_FIFO task")
	}
	// A real-time task and an "irqbalance" that bans no isolated CPU, both
	// in the host's pid namespace. The irqbalance is a copy of sleep that
	// the child sees as the host root's /usr/local/sbin/irqbalance.
	rt := startProc(t, exec.Command("chrt", "-f", "1", "sleep", "60"))
	binDir := t.TempDir()
	t.Setenv(pidnsBinDir, binDir)
	fake := filepath.Join(binDir, "irqbalance")
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fake, data, 0o755); err != nil {
		t.Fatal(err)
	}
	irqb := exec.Command(fake, "60")
	irqb.Env = []string{"IRQBALANCE_BANNED_CPULIST=0"}
	irqbPID := startProc(t, irqb)

	hostRoot := t.TempDir()
	res := measureInPidns(t, hostRoot)
	if res.Latency == nil || res.Latency.Source != measure.SourceSchedstat || len(res.Latency.Classes) == 0 || res.Latency.Classes[0].Samples == 0 {
		t.Errorf("schedstat through the host root measured nothing: %+v", res.Latency)
	}
	rtMsg, irqMsg := findingMessages(res)
	if !strings.Contains(rtMsg, "(tid "+strconv.Itoa(rt)+",") {
		t.Errorf("RT task (host pid %d) not found through the host root: %q", rt, rtMsg)
	}
	if !strings.Contains(irqMsg, "(pid "+strconv.Itoa(irqbPID)+")") {
		t.Errorf("irqbalance (host pid %d) not found through the host root: %q", irqbPID, irqMsg)
	}

	// Control: the namespace's own /proc shows neither, so the run above
	// saw the host's tasks because of the host root, not by accident.
	ctl := measureInPidns(t, "/")
	if rtMsg, irqMsg := findingMessages(ctl); strings.Contains(rtMsg, strconv.Itoa(rt)) || irqMsg != "" {
		t.Errorf("the namespace's own /proc showed host tasks (%q, %q): the test proves nothing", rtMsg, irqMsg)
	}
}

// startProc starts cmd and kills it at the end of the test; it returns the pid.
func startProc(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd.Process.Pid
}

func findingMessages(res *measure.Result) (rt, irqbalance string) {
	for _, f := range res.Findings {
		switch f.Type {
		case findings.FindingRTTasksIsolated:
			rt = f.Message
		case findings.FindingIRQBalance:
			irqbalance = f.Message
		}
	}
	return rt, irqbalance
}

// measureInPidns re-runs this test as a child in new pid and mount
// namespaces and returns the measure.Result the child measured there, as JSON. dir "/" reads
// the namespace's own /proc; any other dir becomes the host root.
func measureInPidns(t *testing.T, dir string) *measure.Result {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestProcessReadsNeedNoHostPID$", "-test.v")
	cmd.Env = append(os.Environ(), pidnsChild+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, out, stderr.String())
	}
	_, js, ok := strings.Cut(string(out), "<<<")
	js, _, ok2 := strings.Cut(js, ">>>")
	if !ok || !ok2 {
		t.Fatalf("child printed no result:\n%s", out)
	}
	var res measure.Result
	if err := json.Unmarshal([]byte(js), &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// runPidnsChild is the agent's container without hostPID: mounts private to
// this namespace, the host's "/" (with the host's procfs at proc)
// bind-mounted at dir, and a procfs of the new pid namespace on /proc.
func runPidnsChild(t *testing.T, dir string) {
	if os.Getpid() != 1 {
		t.Fatalf("child is pid %d, not 1 of a new pid namespace", os.Getpid())
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	root := dir
	if dir != "/" {
		if err := unix.Mount("/", dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			t.Fatal(err)
		}
		if bin := os.Getenv(pidnsBinDir); bin != "" {
			if err := unix.Mount(bin, filepath.Join(dir, "usr", "local", "sbin"), "", unix.MS_BIND, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := unix.Mount("proc", "/proc", "proc", 0, ""); err != nil {
		t.Fatal(err)
	}
	m := New(measure.New(host.New(root), logr.Discard(), measure.WithAttach(measure.AttachNone)))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the measurement window: schedstat needs time to pass
	res, err := m.Collect(context.Background(), Input{Tuning: tuning("1", "0")})
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	buf := bytes.NewBuffer(js)
	os.Stdout.WriteString("<<<" + buf.String() + ">>>\n")
}
