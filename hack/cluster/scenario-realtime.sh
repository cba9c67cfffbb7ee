# shellcheck shell=bash disable=SC2154
# Sourced by test.sh (CLUSTER_SCENARIOS): realtime on one node, the hostPID agent there only;
# its helpers and NODES, SYSCTL and LABEL come from there.

say "Realtime on one node: only node-6-12's agent runs the hostPID variant"
# Two profiles, one node each: cluster-std (node-6-1) a sysctl only,
# cluster-rt (node-6-12) the same sysctl and realtime for the default
# namespace (realtime needs cpus.isolated, CPU 1, and that needs
# cpus.reserved, CPU 0). The manager labels node-6-12 for the hostPID agent
# and node-6-1 for the standard one; which agent pods run where is read
# from the API, and the PID namespace each agent process is in from the
# guest's own kernel (guest-node.sh "agent pidns": PID 1's namespace or one
# of its own), as is the sysctl each wrote.
RT_STD=latencytier.io/cluster-e2e-std RT_RT=latencytier.io/cluster-e2e-rt
rt_profiles() {
  cat <<YAML
apiVersion: tuning.latencytier.io/v1alpha1
kind: LatencyProfile
metadata:
  name: cluster-std
spec:
  nodeSelector:
    matchLabels: {$RT_STD: ""}
  sysctls:
  - {name: vm.swappiness, value: "20"}
---
apiVersion: tuning.latencytier.io/v1alpha1
kind: LatencyProfile
metadata:
  name: cluster-rt
spec:
  nodeSelector:
    matchLabels: {$RT_RT: ""}
  sysctls:
  - {name: vm.swappiness, value: "20"}
  realtime:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: default}
  cpus:
    reserved: "0"
    isolated: "1"
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: default}
YAML
}
# agents: "node=variant:hostPID:ready" for every agent pod
agents() {
  k -n latencytier-system get pods -l app.kubernetes.io/component=agent \
    -o jsonpath='{range .items[*]}{.spec.nodeName}={.metadata.labels.latencytier\.io/agent-variant}:{.spec.hostPID}:{.status.containerStatuses[0].ready}{" "}{end}'
}
agents_placed() { [[ "$(agents | tr ' ' '\n' | LC_ALL=C sort | xargs)" == "node-6-12=hostpid:true:true node-6-1=standard::true" ]]; }
agent_label() { k get node "$1" -o jsonpath='{.metadata.labels.node-restriction\.kubernetes\.io/latencytier-agent}'; }
swappiness_20() { [[ "$(ask node-6-1 $SYSCTL)" == 20 && "$(ask node-6-12 $SYSCTL)" == 20 ]]; }
k label node node-6-1 "$RT_STD=" --overwrite >/dev/null
k label node node-6-12 "$RT_RT=" --overwrite >/dev/null
t=$SECONDS
rt_profiles >"$STATE/cluster-rt.yaml"
must "apply cluster-std (node-6-1) and cluster-rt (node-6-12, realtime)" k apply -f "$STATE/cluster-rt.yaml"
labels_placed() { [[ "$(agent_label node-6-12)" == hostpid && "$(agent_label node-6-1)" == standard ]]; }
check "node-6-12 labelled for the hostPID agent, node-6-1 for the standard one" wait_until 120 labels_placed
figure rt_labelled_s $((SECONDS - t))
check "agent pods: the hostPID one Ready on node-6-12 only, the standard one on node-6-1 only" wait_until "${RT_TIMEOUT:-600}" agents_placed
echo "  (agent pods: $(agents))"
figure rt_agents_ready_s $((SECONDS - t))
check "vm.swappiness 20 on both, each written by its own agent (guest kernels)" wait_until 300 swappiness_20
figure rt_applied_s $((SECONDS - t))
p1=$(ask node-6-1 "agent pidns") p2=$(ask node-6-12 "agent pidns")
check "node-6-12's agent runs in the guest's own PID namespace (guest kernel: $p2)" [ "$p2" = host ]
check "node-6-1's agent runs in a PID namespace of its own (guest kernel: $p1)" [ "$p1" = pod ]
k get ln -o wide || true
t=$SECONDS
k delete latencyprofile cluster-std cluster-rt --timeout=300s >/dev/null || fail "delete cluster-std, cluster-rt"
for n in "${NODES[@]}"; do
  check "$n: vm.swappiness 60 after the deletion (guest kernel)" wait_until 300 bash -c "[ \"\$('$C' ask $n $SYSCTL)\" = 60 ]"
done
figure rt_revert_s $((SECONDS - t))
