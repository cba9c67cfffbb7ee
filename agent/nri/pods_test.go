package nri

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"

	"latencytier.io/latencytier/agent/podcgroup"
)

const (
	uid   = "6c8b2a4e-5d1f-4c3a-9e2b-1f0a7d3c8e91"
	ctrID = "3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a"
)

// sandbox is a pod sandbox as containerd hands it to NRI for a Burstable
// pod under the cgroupfs driver: kubelet's labels beside the pod's own.
func sandboxOf(id, ns, name, podUID string) *api.PodSandbox {
	return &api.PodSandbox{Id: id, Name: name, Namespace: ns, Uid: podUID,
		Labels:      map[string]string{"app": "gw", "io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.uid": podUID},
		Annotations: map[string]string{"latencytier.io/cpu-quota": "disable", "kubernetes.io/config.source": "api"},
		Linux:       &api.LinuxPodSandbox{CgroupParent: "/kubepods/burstable/pod" + podUID}}
}

func container(id, sandbox string) *api.Container {
	return &api.Container{Id: id, PodSandboxId: sandbox, Name: "app", State: api.ContainerState_CONTAINER_RUNNING}
}

func list(t *testing.T, c *Pods) []podcgroup.Pod {
	t.Helper()
	pods, err := c.Pods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

func signalled(c *Pods) bool {
	select {
	case <-c.Changed():
		return true
	default:
		return false
	}
}

func TestPodsFromSynchronize(t *testing.T) {
	var refused []error
	c := NewPods(func(err error) { refused = append(refused, err) })
	c.synchronize([]*api.PodSandbox{sandboxOf("sb1", "trading", "gw-0", uid)}, []*api.Container{container(ctrID, "sb1"), container("orphan", "nosuch")})
	pods := list(t, c)
	if len(pods) != 1 {
		t.Fatalf("pods = %+v; want one", pods)
	}
	p := pods[0]
	want := podcgroup.Pod{UID: uid, Namespace: "trading", Name: "gw-0", QOSClass: QOSBurstable,
		Labels:       map[string]string{"app": "gw"},
		Annotations:  map[string]string{"latencytier.io/cpu-quota": "disable", "kubernetes.io/config.source": "api"},
		ContainerIDs: []string{ctrID}}
	if p.UID != want.UID || p.Namespace != want.Namespace || p.Name != want.Name || p.QOSClass != want.QOSClass ||
		!maps.Equal(p.Labels, want.Labels) || !maps.Equal(p.Annotations, want.Annotations) ||
		strings.Join(p.ContainerIDs, ",") != ctrID || p.Resizing {
		t.Errorf("pod = %+v\nwant  %+v", p, want)
	}
	// podcgroup matches NRI's bare IDs to cgroup directories as it does
	// the API's "containerd://<id>".
	if podcgroup.ShortID(p.ContainerIDs[0]) != podcgroup.ShortID("containerd://"+ctrID) {
		t.Errorf("bare NRI ID %s does not match its containerd:// form", p.ContainerIDs[0])
	}
	if !signalled(c) {
		t.Error("Synchronize did not signal a change")
	}
	if len(refused) != 0 {
		t.Errorf("refused %v", refused)
	}
}

func TestPodsUnknownUntilSynchronized(t *testing.T) {
	c := NewPods(nil)
	c.deadline = time.Now() // no wait for the first sync
	if _, err := c.Pods(context.Background()); !errors.Is(err, ErrPodsUnknown) {
		t.Fatalf("before Synchronize: err = %v; want ErrPodsUnknown", err)
	}
	c.synchronize(nil, nil)
	if pods := list(t, c); len(pods) != 0 {
		t.Fatalf("synchronized with no pods: %+v", pods)
	}
	signalled(c)
	c.lost("no NRI socket at /x")
	_, err := c.Pods(context.Background())
	if !errors.Is(err, ErrPodsUnknown) || !strings.Contains(err.Error(), "no NRI socket at /x") {
		t.Fatalf("after the connection was lost: err = %v; want ErrPodsUnknown saying why", err)
	}
	if !signalled(c) {
		t.Error("losing the runtime did not signal a change")
	}
}

func TestPodsWaitsForTheFirstSync(t *testing.T) {
	c := NewPods(nil)
	go func() {
		time.Sleep(50 * time.Millisecond)
		c.synchronize([]*api.PodSandbox{sandboxOf("sb1", "trading", "gw-0", uid)}, nil)
	}()
	if pods := list(t, c); len(pods) != 1 {
		t.Fatalf("pods = %+v; want the pod the first sync brought", pods)
	}
}

func TestPodsLifecycle(t *testing.T) {
	c := NewPods(nil)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	c.synchronize(nil, nil)
	signalled(c)
	sb := sandboxOf("sb1", "trading", "gw-0", uid)
	step := func(what string, f func(), wantSignal bool) {
		t.Helper()
		f()
		if got := signalled(c); got != wantSignal {
			t.Errorf("%s: signalled %v, want %v", what, got, wantSignal)
		}
	}
	step("RunPodSandbox", func() { c.runPod(sb) }, true)
	step("CreateContainer", func() { c.container(sb, container(ctrID, "sb1")) }, true)
	step("StartContainer of a known container", func() { c.container(sb, container(ctrID, "sb1")) }, false)
	if p := list(t, c); len(p) != 1 || len(p[0].ContainerIDs) != 1 {
		t.Fatalf("pods = %+v", p)
	}
	step("UpdateContainer", func() { c.updating(container(ctrID, "sb1")) }, true)
	if p := list(t, c); !p[0].Resizing {
		t.Error("not Resizing between UpdateContainer and PostUpdateContainer")
	}
	step("PostUpdateContainer", func() { c.updated(container(ctrID, "sb1")) }, true)
	if p := list(t, c); p[0].Resizing {
		t.Error("still Resizing after PostUpdateContainer")
	}
	// An update the runtime failed (no PostUpdateContainer) ends with ResizeHold.
	c.updating(container(ctrID, "sb1"))
	now = now.Add(ResizeHold)
	if p := list(t, c); p[0].Resizing {
		t.Error("still Resizing ResizeHold after an UpdateContainer without PostUpdateContainer")
	}
	step("RemoveContainer", func() { c.removeContainer(container(ctrID, "sb1")) }, true)
	if p := list(t, c); len(p[0].ContainerIDs) != 0 {
		t.Errorf("container kept after RemoveContainer: %+v", p)
	}
	step("StopPodSandbox", func() { c.stopPod(sb) }, true)
	if p := list(t, c); len(p) != 0 {
		t.Errorf("a stopped pod is listed: %+v", p)
	}
	step("RemovePodSandbox", func() { c.removePod(sb) }, true)
	if len(c.sandboxes) != 0 {
		t.Errorf("sandbox kept after RemovePodSandbox")
	}
}

// A pod with a second sandbox (kubelet made a new one, the old is not
// removed yet) is one pod with the containers of both.
func TestPodsTwoSandboxesOnePod(t *testing.T) {
	c := NewPods(nil)
	c.synchronize([]*api.PodSandbox{sandboxOf("old", "trading", "gw-0", uid), sandboxOf("new", "trading", "gw-0", uid)},
		[]*api.Container{container("aaa", "old"), container("bbb", "new")})
	p := list(t, c)
	if len(p) != 1 || len(p[0].ContainerIDs) != 2 {
		t.Fatalf("pods = %+v; want one pod with both containers", p)
	}
}

// What kubelet makes the cgroup parent of, for both drivers, and what is
// not a kubelet pod cgroup (unknown, never Guaranteed).
func TestQOSClass(t *testing.T) {
	esc := strings.ReplaceAll(uid, "-", "_")
	for _, tc := range []struct{ parent, want string }{
		{"/kubepods/pod" + uid, QOSGuaranteed},
		{"/kubepods/burstable/pod" + uid, QOSBurstable},
		{"/kubepods/besteffort/pod" + uid, QOSBestEffort},
		{"/custom-root/kubepods/burstable/pod" + uid, QOSBurstable},
		{"kubepods-pod" + esc + ".slice", QOSGuaranteed},
		{"kubepods-burstable-pod" + esc + ".slice", QOSBurstable},
		{"kubepods-besteffort-pod" + esc + ".slice", QOSBestEffort},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc + ".slice", QOSBurstable},
		{"", ""},
		{"/kubepods/burstable/pod" + "other-uid", ""},
		{"/kubepods/burstable", ""},
		{"/elsewhere/pod" + uid, ""},
		{"/", ""},
		{"kubepods-burstable-pod" + uid + ".slice", ""}, // not escaped: not kubelet's
		{"kubepods-guaranteed-pod" + esc + ".slice", ""},
		{"system.slice", ""},
	} {
		if got := QOSClass(tc.parent, uid); got != tc.want {
			t.Errorf("QOSClass(%q) = %q, want %q", tc.parent, got, tc.want)
		}
	}
}

// Hostile sandboxes and containers are refused, each with an error naming
// the field, and never listed.
func TestPodsRefuseHostileInput(t *testing.T) {
	big := map[string]string{"a": strings.Repeat("x", MaxAnnotationBytes)}
	manyLabels := map[string]string{}
	for i := range MaxLabels + 10 {
		manyLabels["l"+strings.Repeat("x", i%50)+string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	for _, tc := range []struct {
		name  string
		mod   func(*api.PodSandbox)
		field string
	}{
		{"uid escapes the cgroup", func(p *api.PodSandbox) { p.Uid = "../../etc" }, "field uid"},
		{"uid with a slash", func(p *api.PodSandbox) { p.Uid = "a/b" }, "field uid"},
		{"empty uid", func(p *api.PodSandbox) { p.Uid = "" }, "field uid"},
		{"namespace not a DNS label", func(p *api.PodSandbox) { p.Namespace = "Kube_System" }, "field namespace"},
		{"namespace with a slash", func(p *api.PodSandbox) { p.Namespace = "a/b" }, "field namespace"},
		{"name not a DNS subdomain", func(p *api.PodSandbox) { p.Name = "gw/../x" }, "field name"},
		{"name too long", func(p *api.PodSandbox) { p.Name = strings.Repeat("a", 254) }, "field name"},
		{"sandbox id with a slash", func(p *api.PodSandbox) { p.Id = "../sb" }, "field id"},
		{"label key invalid", func(p *api.PodSandbox) { p.Labels = map[string]string{"bad key": "v"} }, "field labels"},
		{"label value invalid", func(p *api.PodSandbox) { p.Labels = map[string]string{"k": strings.Repeat("v", 64)} }, "field labels"},
		{"too many labels", func(p *api.PodSandbox) { p.Labels = manyLabels }, "field labels"},
		{"annotations too big", func(p *api.PodSandbox) { p.Annotations = big }, "field annotations"},
		{"cgroup parent too long", func(p *api.PodSandbox) {
			p.Linux = &api.LinuxPodSandbox{CgroupParent: strings.Repeat("/a", maxCgroupParent)}
		}, "field linux.cgroup_parent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var refused []error
			c := NewPods(func(err error) { refused = append(refused, err) })
			sb := sandboxOf("sb1", "trading", "gw-0", uid)
			tc.mod(sb)
			c.synchronize([]*api.PodSandbox{sb}, []*api.Container{container(ctrID, sb.Id)})
			if p := list(t, c); len(p) != 0 {
				t.Errorf("hostile sandbox listed: %+v", p)
			}
			if len(refused) != 1 || !strings.Contains(refused[0].Error(), tc.field) {
				t.Errorf("refusals %v; want one naming %q", refused, tc.field)
			}
		})
	}
	t.Run("container id", func(t *testing.T) {
		var refused []error
		c := NewPods(func(err error) { refused = append(refused, err) })
		c.synchronize([]*api.PodSandbox{sandboxOf("sb1", "trading", "gw-0", uid)}, []*api.Container{container("../../x", "sb1")})
		if p := list(t, c); len(p) != 1 || len(p[0].ContainerIDs) != 0 {
			t.Errorf("pods = %+v; want the pod without the hostile container", p)
		}
		if len(refused) != 1 || !strings.Contains(refused[0].Error(), "field id") {
			t.Errorf("refusals %v; want one naming the container's id", refused)
		}
	})
	t.Run("too many containers", func(t *testing.T) {
		var refused []error
		c := NewPods(func(err error) { refused = append(refused, err) })
		sb := sandboxOf("sb1", "trading", "gw-0", uid)
		var ctrs []*api.Container
		for i := range MaxContainers + 5 {
			ctrs = append(ctrs, container("c"+strings.Repeat("0", i%100)+string(rune('a'+i%26))+string(rune('a'+i/26%26)), "sb1"))
		}
		c.synchronize([]*api.PodSandbox{sb}, ctrs)
		if p := list(t, c); len(p) != 1 || len(p[0].ContainerIDs) != MaxContainers {
			t.Errorf("containers = %d; want at most %d", len(p[0].ContainerIDs), MaxContainers)
		}
		if len(refused) == 0 {
			t.Error("containers beyond the bound refused silently")
		}
	})
	t.Run("too many sandboxes", func(t *testing.T) {
		c := NewPods(nil)
		var sbs []*api.PodSandbox
		for i := range MaxSandboxes + 3 {
			id := strings.Repeat("s", 1+i%90) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
			sbs = append(sbs, sandboxOf(id, "ns", "p", uid))
		}
		c.synchronize(sbs, nil)
		if len(c.sandboxes) != MaxSandboxes {
			t.Errorf("held %d sandboxes; want at most %d", len(c.sandboxes), MaxSandboxes)
		}
	})
}

// The cache hands out copies: a caller changing a pod's maps does not
// change the next pass's pods.
func TestPodsAreCopies(t *testing.T) {
	c := NewPods(nil)
	c.synchronize([]*api.PodSandbox{sandboxOf("sb1", "trading", "gw-0", uid)}, nil)
	p := list(t, c)
	p[0].Labels["app"] = "changed"
	p[0].Annotations["x"] = "y"
	again := list(t, c)
	if again[0].Labels["app"] != "gw" || again[0].Annotations["x"] != "" {
		t.Errorf("a caller's change reached the cache: %+v", again[0])
	}
}
