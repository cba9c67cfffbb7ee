package fleetsim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"latencytier.io/latencytier/controllers"
)

// The two clients the API server's metrics tell apart.
// apiserver_request_total has no user or user-agent label (and the manager
// writes LatencyNode status too: the rollout's verdict), so each client
// authenticates as its own user in its own group, and FlowSchemas per group
// and kind of request make API Priority and Fairness count them in
// apiserver_flowcontrol_dispatched_requests_total{flow_schema=...}: the
// status writes we watch, other writes, and everything else (reads,
// watches). All use the exempt priority level: we measure what our code
// asks of the API server, not APF's queueing.
const (
	managerGroup = "fleetsim:manager"
	agentsGroup  = "fleetsim:agents"
	// operatorNamespace is the operator namespace (agent DaemonSet).
	operatorNamespace = "latencytier-system"
)

// flows are the FlowSchemas, most specific first (lowest precedence).
var flows = []flow{
	{"fleetsim-manager-profile-status", managerGroup, []string{"patch", "update"}, "latencyprofiles/status"},
	{"fleetsim-manager-node-status", managerGroup, []string{"patch", "update"}, "latencynodes/status"},
	// The manager's other writes by resource, so a run says which of
	// them grow with the fleet.
	{"fleetsim-manager-nodes", managerGroup, writeVerbs, "nodes"},
	{"fleetsim-manager-latencynodes", managerGroup, writeVerbs, "latencynodes"},
	// An Event patch is client-go's events/v1 broadcaster updating a
	// series (the second occurrence of an event, and the final count it
	// writes 6-12 min after a series' last occurrence, finishSeries): the
	// trail of earlier events, not a decision of the manager's.
	{"fleetsim-manager-event-series", managerGroup, []string{"patch", "update"}, "events"},
	{"fleetsim-manager-events", managerGroup, writeVerbs, "events"},
	{"fleetsim-manager-writes", managerGroup, writeVerbs, "*"},
	{"fleetsim-manager-other", managerGroup, []string{"*"}, "*"},
	{"fleetsim-agents-status", agentsGroup, []string{"patch", "update"}, "latencynodes/status"},
	{"fleetsim-agents-writes", agentsGroup, writeVerbs, "*"},
	{"fleetsim-agents-other", agentsGroup, []string{"*"}, "*"},
}

var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// flow is one FlowSchema: the requests of group with verbs on resource.
type flow struct {
	name, group string
	verbs       []string
	resource    string
}

// apiServer is the real etcd + kube-apiserver with the CRDs, an admin
// client (the simulator's own reads and writes) and one rest.Config per
// measured client.
type apiServer struct {
	env      *envtest.Environment
	admin    client.Client
	adminCfg *rest.Config
	mgrCfg   *rest.Config
	agentCfg *rest.Config
	// mgrKubeconfig is a kubeconfig file for the manager's user.
	mgrKubeconfig string
}

func startAPIServer(ctx context.Context, assets, crdDir, tmp string) (*apiServer, error) {
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{crdDir},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	// /debug/pprof for -apiserver-cpuprofile (envtest's API server has it off).
	env.ControlPlane.GetAPIServer().Configure().Set("profiling", "true")
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest (etcd + kube-apiserver from %s): %w", assets, err)
	}
	s := &apiServer{env: env, adminCfg: cfg}
	if err := s.setup(ctx, tmp); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return s, nil
}

func (s *apiServer) setup(ctx context.Context, tmp string) error {
	var err error
	cfg := rest.CopyConfig(s.adminCfg)
	cfg.UserAgent = "fleetsim-driver"
	cfg.QPS, cfg.Burst = 500, 1000
	if s.admin, err = client.New(cfg, client.Options{Scheme: controllers.NewScheme()}); err != nil {
		return err
	}
	mgr, err := s.env.AddUser(envtest.User{Name: "latencytier-manager", Groups: []string{managerGroup}}, nil)
	if err != nil {
		return fmt.Errorf("add manager user: %w", err)
	}
	agents, err := s.env.AddUser(envtest.User{Name: "latencytier-agents", Groups: []string{agentsGroup}}, nil)
	if err != nil {
		return fmt.Errorf("add agents user: %w", err)
	}
	s.mgrCfg, s.agentCfg = mgr.Config(), agents.Config()
	s.mgrCfg.UserAgent, s.agentCfg.UserAgent = "latencytier-manager/fleetsim", "latencytier-agent/fleetsim"
	kc, err := mgr.KubeConfig()
	if err != nil {
		return err
	}
	s.mgrKubeconfig = filepath.Join(tmp, "manager.kubeconfig")
	if err := os.WriteFile(s.mgrKubeconfig, kc, 0o600); err != nil {
		return err
	}
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}}
	for _, g := range []string{managerGroup, agentsGroup} {
		// cluster-admin: RBAC is not what this measures (config/rbac is
		// tested elsewhere); one binding per group.
		objs = append(objs, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "fleetsim-" + g[len("fleetsim:"):]},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g}},
		})
	}
	for i, fl := range flows {
		objs = append(objs, flowSchema(fl, int32(100+i)))
	}
	for _, o := range objs {
		if err := s.admin.Create(ctx, o); err != nil {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	return s.waitFlowSchemas(ctx)
}

// flowSchema sends fl's requests to the exempt priority level under its
// own name.
func flowSchema(fl flow, precedence int32) *flowcontrolv1.FlowSchema {
	rule := flowcontrolv1.PolicyRulesWithSubjects{
		Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindGroup,
			Group: &flowcontrolv1.GroupSubject{Name: fl.group}}},
		ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: fl.verbs, APIGroups: []string{"*"},
			Resources: []string{fl.resource}, ClusterScope: true, Namespaces: []string{"*"}}},
	}
	if fl.resource == "*" {
		rule.NonResourceRules = []flowcontrolv1.NonResourcePolicyRule{{Verbs: fl.verbs, NonResourceURLs: []string{"*"}}}
	}
	return &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: fl.name},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "exempt"},
			MatchingPrecedence:         precedence,
			Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{rule},
		},
	}
}

// waitFlowSchemas waits until APF has taken every schema in (it marks each
// with a Dangling condition when it has).
func (s *apiServer) waitFlowSchemas(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, fl := range flows {
		for {
			var fs flowcontrolv1.FlowSchema
			if err := s.admin.Get(ctx, client.ObjectKey{Name: fl.name}, &fs); err != nil {
				return err
			}
			if len(fs.Status.Conditions) > 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("FlowSchema %s not taken in by APF after 30s", fl.name)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

func (s *apiServer) stop() error { return s.env.Stop() }
