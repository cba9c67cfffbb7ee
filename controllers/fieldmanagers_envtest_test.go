package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
)

// One writer per field (issue 42), checked where it shows: the field
// managers of managedFields, recorded through a rollout, a rollback, a
// managed reboot there and back and a deletion, against the writer table
// of docs/architecture.md; and the profile's status patches, counted per
// reconcile pass.

// fieldRow names the row of the writer table that holds a field: a field
// of kind whose managedFields path (fieldPaths) starts with prefix. The
// longest prefix wins.
type fieldRow struct{ kind, prefix, row string }

// fieldRows are the fields the manager writes, by the writer table's rows.
// A field the manager owns that no row names fails the test.
var fieldRows = []fieldRow{
	{"LatencyNode", "f:spec", "LatencyNode spec"},
	{"LatencyNode", "f:metadata.f:annotations.f:" + v1alpha1.RevisionSetAtAnnotation, "LatencyNode spec"},
	{"LatencyNode", "f:metadata.f:ownerReferences", "LatencyNode (create)"},
	{"Node", "f:metadata.f:labels", "Node labels"},
	{"Node", "f:metadata.f:annotations", "Node labels"},
	{"Node", "f:spec.f:taints", "Node taints"},
	{"Node", "f:spec.f:unschedulable", "Node spec.unschedulable + cordon marker"},
	{"Node", "f:metadata.f:annotations.f:" + v1alpha1.RebootCordonAnnotation, "Node spec.unschedulable + cordon marker"},
	{"LatencyProfile", "status:f:status", "LatencyProfile status"},
	{"LatencyProfile", "f:metadata.f:finalizers", "LatencyProfile finalizer"},
}

// rowOf is the row of kind's field path, "" when none names it.
func rowOf(kind, path string) string {
	best, row := -1, ""
	for _, r := range fieldRows {
		if r.kind == kind && (path == r.prefix || strings.HasPrefix(path, r.prefix+".")) && len(r.prefix) > best {
			best, row = len(r.prefix), r.row
		}
	}
	return row
}

// writerTable is docs/architecture.md's writer table: each row's field
// and the field managers it names (none for a row of the agent's or of a
// write that keeps no object).
func writerTable(t testing.TB) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "### Who writes which field")
	if start < 0 {
		t.Fatal(`docs/architecture.md has no section "### Who writes which field"`)
	}
	doc = doc[start:]
	if end := strings.Index(doc[4:], "\n#"); end >= 0 {
		doc = doc[:end+4]
	}
	names := regexp.MustCompile("`(" + regexp.QuoteMeta(fieldOwner) + "[^`]*)`")
	rows := map[string][]string{}
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		field := strings.TrimSpace(cells[1])
		if field == "field" {
			continue // the header
		}
		rows[field] = rows[field][:0:0]
		for _, m := range names.FindAllStringSubmatch(cells[2], -1) {
			rows[field] = append(rows[field], m[1])
		}
	}
	if len(rows) == 0 {
		t.Fatal("the writer table names no field manager")
	}
	return rows
}

// TestWriterTableNamesEachFieldManager: every row of the writer table that
// a field the manager writes falls in names exactly one field manager, and
// the table names the manager's field managers, all of them and no other.
func TestWriterTableNamesEachFieldManager(t *testing.T) {
	rows := writerTable(t)
	for _, r := range fieldRows {
		if got := rows[r.row]; len(got) != 1 {
			t.Errorf("writer table row %q names field managers %v, want exactly one", r.row, got)
		}
	}
	known := map[string]bool{}
	for _, m := range executor.FieldManagers {
		known[m] = true
	}
	named := map[string]bool{}
	for row, ms := range rows {
		for _, m := range ms {
			named[m] = true
			if !known[m] {
				t.Errorf("writer table row %q names %s, which is none of the manager's field managers (executor/writers.go)", row, m)
			}
		}
	}
	for _, m := range executor.FieldManagers {
		if !named[m] {
			t.Errorf("field manager %s (executor/writers.go) is in no row of the writer table", m)
		}
	}
}

// writerCells is docs/architecture.md's writer table: each row's field and
// its writer cell.
func writerCells(t testing.TB) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "### Who writes which field")
	if start < 0 {
		t.Fatal(`docs/architecture.md has no section "### Who writes which field"`)
	}
	doc = doc[start:]
	if end := strings.Index(doc[4:], "\n#"); end >= 0 {
		doc = doc[:end+4]
	}
	cells := map[string]string{}
	for _, line := range strings.Split(doc, "\n") {
		c := strings.Split(line, "|")
		if len(c) >= 5 && !strings.HasPrefix(strings.TrimSpace(c[1]), "---") {
			cells[strings.TrimSpace(c[1])] = c[3]
		}
	}
	return cells
}

// TestWriterTableNamesTheExecutorsWriters: each row of the manager's
// writes (rbacWrites) names the executor's functions that write it, and
// each executor function the table names is one the executor has: the
// table cannot name a writer that was renamed or that no longer exists.
func TestWriterTableNamesTheExecutorsWriters(t *testing.T) {
	files, err := filepath.Glob("executor/*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	has := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.IsExported() {
				has[fn.Name.Name] = true
			}
		}
	}
	if !has["WriteLatencyNodeSpec"] {
		t.Fatalf("parsed the executor's functions %v, without WriteLatencyNodeSpec", has)
	}
	named := regexp.MustCompile("`executor\\.([A-Za-z]+)`")
	cells := writerCells(t)
	for row := range rbacWrites {
		cell, ok := cells[row]
		if !ok {
			t.Errorf("the writer table has no row %q", row)
			continue
		}
		fns := named.FindAllStringSubmatch(cell, -1)
		if len(fns) == 0 {
			t.Errorf("writer table row %q names no function of the executor", row)
		}
		for _, m := range fns {
			if !has[m[1]] && m[1] != "Workers" {
				t.Errorf("writer table row %q names executor.%s, which the executor does not have", row, m[1])
			}
		}
	}
}

// fieldPaths flattens managedFields' FieldsV1 into the paths of its
// fields ("f:spec.f:tuning"), prefixed "status:" for the status
// subresource.
func fieldPaths(e metav1.ManagedFieldsEntry) ([]string, error) {
	if e.FieldsV1 == nil {
		return nil, nil
	}
	var tree map[string]any
	if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &tree); err != nil {
		return nil, err
	}
	prefix := ""
	if e.Subresource != "" {
		prefix = e.Subresource + ":"
	}
	var out []string
	var walk func(path string, node map[string]any)
	walk = func(path string, node map[string]any) {
		leaf := true
		for k, v := range node {
			if k == "." {
				continue
			}
			leaf = false
			child, _ := v.(map[string]any)
			if path == "" {
				walk(k, child)
			} else {
				walk(path+"."+k, child)
			}
		}
		if leaf && path != "" {
			out = append(out, prefix+path)
		}
	}
	walk("", tree)
	return out, nil
}

// managerRecorder records, for each field the manager owns, every field
// manager that owned it while it ran: it polls LatencyNodes, Nodes and
// LatencyProfiles (every 100 ms, and at each step a test names).
type managerRecorder struct {
	t     *testing.T
	c     client.Client
	mu    sync.Mutex
	seen  map[string]map[string]string // kind/path → manager → first step seen
	step  string
	stop  chan struct{}
	done  chan struct{}
	polls int
}

func recordManagers(t *testing.T, c client.Client) *managerRecorder {
	r := &managerRecorder{t: t, c: c, seen: map[string]map[string]string{}, step: "(none yet)",
		stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-tick.C:
				r.poll()
			}
		}
	}()
	t.Cleanup(r.end)
	return r
}

func (r *managerRecorder) end() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
		<-r.done
	}
}

// after records the managedFields at the end of step.
func (r *managerRecorder) after(step string) {
	r.poll()
	r.mu.Lock()
	r.step = step
	r.mu.Unlock()
}

func (r *managerRecorder) poll() {
	ctx := context.Background()
	var lns v1alpha1.LatencyNodeList
	var nodes corev1.NodeList
	var profiles v1alpha1.LatencyProfileList
	if r.c.List(ctx, &lns) != nil || r.c.List(ctx, &nodes) != nil || r.c.List(ctx, &profiles) != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.polls++
	for i := range lns.Items {
		r.add("LatencyNode", lns.Items[i].ManagedFields)
	}
	for i := range nodes.Items {
		r.add("Node", nodes.Items[i].ManagedFields)
	}
	for i := range profiles.Items {
		r.add("LatencyProfile", profiles.Items[i].ManagedFields)
	}
}

func (r *managerRecorder) add(kind string, entries []metav1.ManagedFieldsEntry) {
	for _, e := range entries {
		if e.Manager != fieldOwner && !strings.HasPrefix(e.Manager, fieldOwner+"/") {
			continue // the test's own writes, as the user, a kubelet or an agent
		}
		paths, err := fieldPaths(e)
		if err != nil {
			r.t.Errorf("managedFields of a %s: %v", kind, err)
			continue
		}
		for _, p := range paths {
			key := kind + "/" + p
			if r.seen[key] == nil {
				r.seen[key] = map[string]string{}
			}
			if _, ok := r.seen[key][e.Manager]; !ok {
				r.seen[key][e.Manager] = r.step
			}
		}
	}
}

// check fails for a field that had more than one field manager, a field
// no row of the writer table names, or a field manager other than its
// row's; and unless each of wanted (kind/path prefixes) was seen.
func (r *managerRecorder) check(wanted ...string) {
	r.t.Helper()
	r.end()
	table := writerTable(r.t)
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.seen))
	for k := range r.seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		managers := r.seen[key]
		if len(managers) > 1 {
			r.t.Errorf("%s has %d field managers, want one: %v (manager: the last step done when it was first seen)", key, len(managers), managers)
		}
		kind, path, _ := strings.Cut(key, "/")
		row := rowOf(kind, path)
		if row == "" {
			r.t.Errorf("%s is written by %v, and no row of the writer table names it", key, managers)
			continue
		}
		for m := range managers {
			if want := table[row]; len(want) != 1 || want[0] != m {
				r.t.Errorf("%s (row %q) is written by %s, the writer table says %v", key, row, m, want)
			}
		}
	}
	for _, w := range wanted {
		found := false
		for _, key := range keys {
			found = found || key == w || strings.HasPrefix(key, w+".")
		}
		if !found {
			r.t.Errorf("no manager write of %s seen in %d polls: the run did not cover it", w, r.polls)
		}
	}
}

// statusPatchCounter counts the manager's LatencyProfile status patches
// per reconcile pass (controller-runtime's reconcile ID).
type statusPatchCounter struct {
	mu      sync.Mutex
	perPass map[types.UID]int
	most    int
	outside int // patches outside a reconcile
	// refuse: the API server is made to refuse every profile status
	// patch as a conflict; refused counts them.
	refuse  bool
	refused int
}

// setRefuse turns the refusal of profile status patches on or off.
func (c *statusPatchCounter) setRefuse(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refuse = on
}

func newStatusPatchCounter() *statusPatchCounter {
	return &statusPatchCounter{perPass: map[types.UID]int{}}
}

// newClient is the manager's client, counting.
func (c *statusPatchCounter) newClient(cfg *rest.Config, o client.Options) (client.Client, error) {
	inner, err := client.New(cfg, o)
	return statusPatchCounting{Client: inner, n: c}, err
}

// count counts a patch and says whether to refuse it.
func (c *statusPatchCounter) count(ctx context.Context) (refuse bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refuse {
		c.refused++
	}
	id := controller.ReconcileIDFromContext(ctx)
	if id == "" {
		c.outside++
		return c.refuse
	}
	c.perPass[id]++
	c.most = max(c.most, c.perPass[id])
	return c.refuse
}

// check fails unless every pass patched a profile's status at most once,
// and some pass patched it.
func (c *statusPatchCounter) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.most > 1 {
		t.Errorf("a reconcile pass patched a profile's status %d times, want at most once", c.most)
	}
	if c.outside > 0 {
		t.Errorf("%d profile status patches outside a reconcile pass", c.outside)
	}
	if len(c.perPass) == 0 {
		t.Error("no profile status patch counted")
	}
}

type statusPatchCounting struct {
	client.Client
	n *statusPatchCounter
}

func (c statusPatchCounting) Status() client.SubResourceWriter {
	return statusPatchWriter{SubResourceWriter: c.Client.Status(), n: c.n}
}

type statusPatchWriter struct {
	client.SubResourceWriter
	n *statusPatchCounter
}

func (w statusPatchWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if _, ok := obj.(*v1alpha1.LatencyProfile); ok && w.n.count(ctx) {
		return apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("latencyprofiles").GroupResource(), obj.GetName(),
			fmt.Errorf("refused by the test"))
	}
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// TestEachFieldHasOneManager drives a profile through a rollout, a
// rollout with a managed reboot that regresses and is rolled back, the
// reboot back and the profile's deletion, recording the managedFields of
// its LatencyNodes, Nodes and the profile all along: each field the
// manager writes has one field manager, the one the writer table of
// docs/architecture.md names; and no reconcile pass patched the profile's
// status more than once.
func TestEachFieldHasOneManager(t *testing.T) {
	e := startRebootEnv(t, 1)
	rec := recordManagers(t, e.c)
	e.nodes("owners", "owners-a")
	e.spare("owners")
	r1, r2 := e.regressedRollout("owners", "owners-a", false)
	rec.after("rollout, managed reboot, rollback")
	e.until("owners-a rebooted back", func() error {
		ln := e.ln("owners-a")
		if ln == nil || ln.Spec.Revision != r1 || ln.Spec.Reboot != nil || ln.Status.Boot == nil ||
			ln.Status.Boot.RebootedFor != backRevision(r2) {
			return fmt.Errorf("LatencyNode %+v", ln)
		}
		if n := e.node("owners-a"); n.Spec.Unschedulable {
			return fmt.Errorf("still cordoned")
		}
		return nil
	})
	rec.after("reboot back")
	if err := e.c.Delete(context.Background(), e.profile("owners")); err != nil {
		t.Fatal(err)
	}
	// The spare has no agent to revert it: it goes, and its LatencyNode with it.
	if err := e.c.Delete(context.Background(), e.node("owners-zspare")); err != nil {
		t.Fatal(err)
	}
	e.until("profile deleted, its nodes released", func() error {
		if err := e.c.Get(context.Background(), types.NamespacedName{Name: "owners"}, &v1alpha1.LatencyProfile{}); err == nil {
			return fmt.Errorf("profile still there")
		}
		if e.ln("owners-a") != nil || e.ln("owners-zspare") != nil {
			return fmt.Errorf("a LatencyNode is still there")
		}
		if p := e.node("owners-a").Labels[v1alpha1.ProfileLabel]; p != "" {
			return fmt.Errorf("node owners-a still labelled %s", p)
		}
		return nil
	})
	rec.after("deletion")
	rec.check("LatencyNode/f:spec.f:reboot", "LatencyNode/f:spec.f:verifyAfter", "LatencyNode/f:spec.f:tuning",
		"Node/f:metadata.f:labels", "Node/f:spec.f:taints", "Node/f:spec.f:unschedulable",
		"LatencyProfile/status:f:status.f:rollout", "LatencyProfile/status:f:status.f:reboots", "LatencyProfile/f:metadata.f:finalizers")
	e.patches.check(t)
}

// TestRolloutMovesWaitForTheirRecord: the rollout's moves rest on
// status.rollout, written in the pass's one status patch before them (a
// restart between the two must not judge a node again). While the API
// server refuses the profile's status patches, no node moves; once it
// takes them, the canary moves.
func TestRolloutMovesWaitForTheirRecord(t *testing.T) {
	e := startRebootEnv(t, 1)
	e.patches.setRefuse(true)
	e.nodes("held", "held-a")
	e.spare("held")
	p := &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "held"},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "held"}},
			TuningSpec: v1alpha1.TuningSpec{Scheduler: &v1alpha1.SchedulerSpec{Autogroup: ptr.To(v1alpha1.Disabled)},
				Measurement: &v1alpha1.MeasurementSpec{Interval: &metav1.Duration{Duration: 5 * time.Second},
					NamespaceSelector: &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{"latencytier.io/tier": "true"}}}},
			Rollout: testRebootRollout(),
		}}
	if err := e.c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	e.until("held-a's baseline reported", func() error {
		if ln := e.ln("held-a"); ln == nil || ln.Status.Current == nil || ln.Status.Current.Action != v1alpha1.ActionBaseline {
			return fmt.Errorf("no baseline yet")
		}
		return nil
	})
	// The canary's move is due once the baseline's window is over (5s);
	// its record cannot be written.
	time.Sleep(8 * time.Second)
	if ln := e.ln("held-a"); ln.Spec.Action != v1alpha1.ActionBaseline {
		t.Fatalf("held-a moved to %s %s while its profile's status could not be written", ln.Spec.Action, ln.Spec.Revision)
	}
	e.patches.mu.Lock()
	refused := e.patches.refused
	e.patches.mu.Unlock()
	if refused == 0 {
		t.Fatal("no profile status patch was refused: the test proves nothing")
	}
	e.patches.setRefuse(false)
	e.until("held-a moved, its record written", func() error {
		ln := e.ln("held-a")
		ro := e.profile("held").Status.Rollout
		if ln.Spec.Action != v1alpha1.ActionApply || ro == nil || ro.Revision != ln.Spec.Revision {
			return fmt.Errorf("held-a %s %s, status.rollout %+v", ln.Spec.Action, ln.Spec.Revision, ro)
		}
		return nil
	})
}

// rbacWrites are the manager's write rights (config/rbac) each row of the
// writer table stands for.
var rbacWrites = map[string][]string{
	"LatencyNode (create)":                    {"latencynodes/create"},
	"LatencyNode spec":                        {"latencynodes/patch"},
	"LatencyNode (delete)":                    {"latencynodes/delete"},
	"Node labels":                             {"nodes/patch"},
	"Node taints":                             {"nodes/patch"},
	"Node spec.unschedulable + cordon marker": {"nodes/patch"},
	"Pod eviction":                            {"pods/eviction/create"},
	"LatencyProfile finalizer":                {"latencyprofiles/patch"},
	"LatencyProfile status":                   {"latencyprofiles/status/patch"},
	"ControllerRevisions":                     {"controllerrevisions/create", "controllerrevisions/patch", "controllerrevisions/delete"},
}

// rbacWritesNoField are the manager's write rights that write no field of
// the objects it manages.
var rbacWritesNoField = map[string]string{
	"leases/create": "leader election", "leases/update": "leader election",
	"events/create": "events", "events/patch": "events",
	"tokenreviews/create": "the metrics endpoint's authentication", "subjectaccessreviews/create": "its authorization",
}

// TestWriterTableMatchesRBAC: each row of the writer table stands for write
// rights the manager's generated role holds, and each write right the role
// holds is some row's (or writes no field: leader election, events, the
// metrics endpoint's reviews).
func TestWriterTableMatchesRBAC(t *testing.T) {
	table := writerTable(t)
	granted := map[string]bool{}
	raw, err := os.ReadFile("../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var role rbacv1.ClusterRole // a Role's rules read the same
		if err := dec.Decode(&role); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if v == "create" || v == "patch" || v == "update" || v == "delete" || v == "deletecollection" {
						granted[res+"/"+v] = true
					}
				}
			}
		}
	}
	claimed := map[string]bool{}
	for row, rights := range rbacWrites {
		if _, ok := table[row]; !ok {
			t.Errorf("the writer table has no row %q", row)
		}
		for _, right := range rights {
			claimed[right] = true
			if !granted[right] {
				t.Errorf("row %q writes with %s, which config/rbac/role.yaml does not grant", row, right)
			}
		}
	}
	for row, managers := range table {
		if _, ok := rbacWrites[row]; !ok && len(managers) > 0 {
			t.Errorf("writer table row %q has a field manager and no write right in rbacWrites", row)
		}
	}
	for right := range granted {
		if !claimed[right] && rbacWritesNoField[right] == "" {
			t.Errorf("config/rbac/role.yaml grants %s, which no row of the writer table writes with", right)
		}
	}
}
