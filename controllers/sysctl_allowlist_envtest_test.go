package controllers

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// The admission side of the sysctl allowlist, on the real API server with
// config/admission (policy.yaml and the shipped, empty allowed-sysctls.yaml)
// as the suite applies it.

// sysctlProfile is a LatencyProfile carrying raw sysctls.
func sysctlProfile(name string, sysctls ...v1alpha1.Sysctl) *v1alpha1.LatencyProfile {
	return &v1alpha1.LatencyProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": name}},
			TuningSpec:   v1alpha1.TuningSpec{Sysctls: sysctls},
		},
	}
}

// setAdminList writes the admin's unlock and waits until the policy sees
// it (the policy reads its parameter through an informer): probe is a name
// the new list unlocks, or one it no longer unlocks when unlocked is false.
func setAdminList(t *testing.T, list, probe string, unlocked bool) {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: knobs.AdminConfigMap}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{knobs.AdminKey: list}
	if err := k8s.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the policy sees the admin's list "+list, func() error {
		err := k8s.Create(ctx, sysctlProfile("allow-probe", v1alpha1.Sysctl{Name: probe, Value: "1"}), client.DryRunAll)
		if (err == nil) != unlocked {
			return errString("probe " + probe + ": " + errText(err))
		}
		return nil
	})
}

func errText(err error) string {
	if err == nil {
		return "accepted"
	}
	return err.Error()
}

// resetAdminList puts the shipped, empty list back after the test.
func resetAdminList(t *testing.T) {
	t.Cleanup(func() { setAdminList(t, "", "vm.panic_on_oom", false) })
}

// A sysctl on no allowlist (vm.panic_on_oom) is refused, naming
// spec.sysctls[i].name, the sysctl and how to unlock it; the built-in
// allowlist passes without an unlock.
func TestAllowlistPolicyRefusesUnallowedSysctls(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	err := k8s.Create(ctx, sysctlProfile("allow-panic", v1alpha1.Sysctl{Name: "net.core.busy_poll", Value: "50"},
		v1alpha1.Sysctl{Name: "vm.panic_on_oom", Value: "1"}), client.DryRunAll)
	if err := refusedByPolicy(err); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{knobs.AllowlistPolicyName, "spec.sysctls[1].name: sysctl vm.panic_on_oom is not on the built-in allowlist",
		"key allowedSysctls of ConfigMap latencytier-sysctls"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "net.core.busy_poll") {
		t.Errorf("the allowlisted net.core.busy_poll is named as refused: %v", err)
	}
	var allowed []v1alpha1.Sysctl
	for _, n := range knobs.Allowed() {
		v := "0" // a cpulist of CPU 0
		if b, _ := knobs.BoundsOf(n); b.Kind == knobs.KindInteger {
			v = strconv.FormatInt(b.Max, 10) // within the catalogue's bounds (the CRD's own rule)
		}
		allowed = append(allowed, v1alpha1.Sysctl{Name: n, Value: v})
	}
	if err := k8s.Create(ctx, sysctlProfile("allow-builtin", allowed...), client.DryRunAll); err != nil {
		t.Errorf("the built-in allowlist is refused: %v", err)
	}
}

// The admin's ConfigMap unlocks exact names and prefixes, and nothing the
// catalogue refuses outright: kernel.core_pattern stays refused (by the
// CRD's own rules) even when listed.
func TestAdminUnlocksSysctls(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	resetAdminList(t)
	setAdminList(t, "vm.panic_on_oom,\n net.ipv4.tcp_* \nuser.\nkernel.core_pattern\n*", "vm.panic_on_oom", true)
	ok := sysctlProfile("allow-unlocked", v1alpha1.Sysctl{Name: "vm.panic_on_oom", Value: "1"},
		v1alpha1.Sysctl{Name: "net.ipv4.tcp_fastopen", Value: "3"}, v1alpha1.Sysctl{Name: "user.max_user_namespaces", Value: "100"})
	if err := k8s.Create(ctx, ok, client.DryRunAll); err != nil {
		t.Errorf("unlocked sysctls refused: %v", err)
	}
	// A lone "*" unlocks nothing.
	err := k8s.Create(ctx, sysctlProfile("allow-star", v1alpha1.Sysctl{Name: "vm.max_map_count", Value: "1"}), client.DryRunAll)
	if err := refusedByPolicy(err); err != nil {
		t.Errorf("vm.max_map_count under a lone '*': %v", err)
	}
	for _, n := range []string{"kernel.core_pattern", "kernel.sched_rt_period_us"} {
		err := k8s.Create(ctx, sysctlProfile("allow-never", v1alpha1.Sysctl{Name: n, Value: "|/tmp/x"}), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "spec.sysctls[0]") || !strings.Contains(err.Error(), "sysctl "+n+" is refused") {
			t.Errorf("%s unlocked: %v, want the CRD's refusal", n, err)
		}
	}
}

// On update, names the object already carries are not checked again: the
// admin's removing a name must not block the manager's finalizer patches
// (the agents revert it). A new name still is.
func TestAllowlistPolicyChecksOnlyNewNamesOnUpdate(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	resetAdminList(t)
	setAdminList(t, "vm.panic_on_oom", "vm.panic_on_oom", true)
	p := sysctlProfile("allow-update", v1alpha1.Sysctl{Name: "vm.panic_on_oom", Value: "1"})
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	cleanup(t, nil, []string{p.Name})
	setAdminList(t, "", "vm.panic_on_oom", false)
	eventually(t, "a label patch on the profile", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Labels = map[string]string{"touched": "yes"}
		return k8s.Update(ctx, p)
	})
	// The manager may write the profile (finalizer, status) between our
	// read and our update: a conflict says nothing about admission, so
	// read again and retry until the answer is the API server's verdict.
	var err error
	for range 20 {
		if err = k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			t.Fatal(err)
		}
		p.Spec.Sysctls = append(p.Spec.Sysctls, v1alpha1.Sysctl{Name: "vm.overcommit_memory", Value: "2"})
		if err = k8s.Update(ctx, p); !apierrors.IsConflict(err) {
			break
		}
	}
	if err := refusedByPolicy(err); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(err.Error(), "spec.sysctls[1].name: sysctl vm.overcommit_memory") || strings.Contains(err.Error(), "sysctl vm.panic_on_oom") {
		t.Errorf("want only the new vm.overcommit_memory refused: %v", err)
	}
}

// Only the admin writes the unlock: neither the manager's nor the agent's
// service account may create, change or delete ConfigMaps in the operator
// namespace (their roles are config/rbac and config/agent as shipped).
func TestOnlyTheAdminWritesTheSysctlUnlock(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	for who, c := range map[string]client.Client{"manager": managerClient(t), "agent": agentClient(t, "allow-node")} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: knobs.AdminConfigMap},
			Data: map[string]string{knobs.AdminKey: "kernel."}}
		if err := c.Update(ctx, cm); !apierrors.IsForbidden(err) {
			t.Errorf("%s updated the unlock: %v", who, err)
		}
		if err := c.Delete(ctx, cm); !apierrors.IsForbidden(err) {
			t.Errorf("%s deleted the unlock: %v", who, err)
		}
		other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "x-" + who}}
		if err := c.Create(ctx, other); !apierrors.IsForbidden(err) {
			t.Errorf("%s created a ConfigMap: %v", who, err)
		}
	}
}

// Fail closed: without the ConfigMap the policy refuses (parameterNotFound
// Deny) instead of falling back to accepting.
func TestAllowlistPolicyFailsClosedWithoutTheConfigMap(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: testNamespace, Name: knobs.AdminConfigMap}
	if err := k8s.Get(ctx, key, cm); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		restored := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: knobs.AdminConfigMap}, Data: cm.Data}
		if err := k8s.Create(ctx, restored); err != nil {
			t.Errorf("restoring the ConfigMap: %v", err)
		}
		eventually(t, "the policy sees the ConfigMap again", func() error {
			return k8s.Create(ctx, sysctlProfile("allow-back"), client.DryRunAll)
		})
	})
	eventually(t, "a profile refused without the ConfigMap", func() error {
		err := k8s.Create(ctx, sysctlProfile("allow-noparam", v1alpha1.Sysctl{Name: "vm.panic_on_oom", Value: "1"}), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), knobs.AllowlistPolicyName) {
			return errString("not refused by the policy: " + errText(err))
		}
		return nil
	})
}
