# shellcheck shell=bash disable=SC2154
# Sourced by test.sh (CLUSTER_SCENARIOS): make test-node-stack's scenario, the
# node stack users run (cgroup v2, systemd as PID 1 and kubelet's systemd
# cgroup driver, containerd 2 with NRI, the pinned kubelet) on node-6-12
# alone, every value read from the guest's own kernel and systemd
# (guest-node.sh "pod", "unit", "snapshot"), never from a status:
#   apply → Applied; quota removal for a granted pod (cpu.max "max" at pod
#   and container level, and again after kubelet resizes the pod's CPU in
#   place); system.slice and user.slice confined by systemd's AllowedCPUs
#   (init.scope by its cpuset.cpus); a granted Guaranteed pod's exclusive CPU made an isolated
#   cpuset partition; a granted real-time pod created after the profile runs
#   SCHED_FIFO from the first look, set at its creation by the agent's NRI
#   plugin (the node says the runtime takes it in RuntimeHookConnected);
#   delete → the snapshot byte-identical to before.
# The node runs kubelet's static CPU manager with CPU 0 reserved and four
# CPUs (make test-node-stack: CLUSTER_CPU_MANAGER=static VM_SMP=4), so the
# two Guaranteed pods (stack-isolated, then stack-rt) get CPUs 1 and 2, the
# profile's isolated CPUs. With three, stack-rt was refused OutOfcpu
# (1120m of 2000m used).
# Every wait is bounded; the cluster is torn down by test.sh's trap.

N=node-6-12
say "The node stack on $N: containerd 2 with NRI, systemd cgroup driver, cgroup v2 (guest kernel and systemd)"
stack_pods() {
  local name req lim
  for name in stack-quota stack-isolated; do
    # stack-quota Burstable: 100m request, 300m limit (cpu.max 30000);
    # stack-isolated Guaranteed with one whole CPU: an exclusive CPU
    if [[ $name == stack-quota ]]; then req=100m lim=300m; else req='"1"' lim='"1"'; fi
    cat <<YAML
---
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: default
  annotations: {latencytier.io/cpu-quota: disable}
spec:
  nodeName: $N
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: $PAUSE_IMAGE_REF
    imagePullPolicy: Never
    resources:
      requests: {cpu: $req, memory: 32Mi}
      limits: {cpu: $lim, memory: 32Mi}
YAML
  done
}
stack_profile() {
  cat <<YAML
apiVersion: tuning.latencytier.io/v1alpha1
kind: LatencyProfile
metadata:
  name: node-stack
spec:
  nodeSelector:
    matchLabels: {$LABEL: ""}
  cpus:
    reserved: "0"
    isolated: "1-2"
    partition: Isolated
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: default}
  cpuQuota:
    policy: Remove
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: default}
  realtime:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: default}
YAML
}
# stack-rt: Guaranteed with one whole CPU (kubelet's exclusive CPU, the
# isolated one stack-isolated does not hold), asking SCHED_FIFO 10 and not
# the quota removal (so no partition of its own).
stack_rt_pod() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: stack-rt
  namespace: default
  annotations: {latencytier.io/sched-policy: "fifo:10"}
spec:
  nodeName: $N
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: $PAUSE_IMAGE_REF
    imagePullPolicy: Never
    resources:
      requests: {cpu: "1", memory: 32Mi}
      limits: {cpu: "1", memory: 32Mi}
YAML
}
PAUSE_IMAGE_REF=latencytier.local/pause:1
pod_uid() { k get pod "$1" -o jsonpath='{.metadata.uid}'; }
pod_cid() { local c; c=$(k get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}'); echo "${c#*://}"; }
# podcg POD: "pod=… container=… partition=… cpus=… weight=…" from the guest
podcg() { ask $N "pod ${UID_OF[$1]} ${CID_OF[$1]}"; }
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
quota_max() { local v; v=$(podcg "$1"); [[ "$(field "$v" pod) $(field "$v" container)" == "max max" ]]; }
snap() { ask $N "snapshot ${UID_OF[stack-quota]} ${UID_OF[stack-isolated]}"; }
ln_applied() {
  [[ "$(k get latencynode $N -o jsonpath='{.status.profileGeneration} {.status.conditions[?(@.type=="Applied")].status}')" == "$1 True" ]]
}
unit_cpus() { ask $N "unit $1 AllowedCPUs"; }
# system.slice and user.slice through systemd's runtime AllowedCPUs
# (agent/systemd.Slices); init.scope through its cpuset.cpus alone, as the
# agent does (it sets no unit property there).
confined() {
  [[ "$(unit_cpus system.slice)" == 0 && "$(unit_cpus user.slice)" == 0 &&
    "$(ask $N /sys/fs/cgroup/init.scope/cpuset.cpus)" == 0 ]]
}
# resize CPU_REQUEST CPU_LIMIT: kubelet's in-place resize of stack-quota
# (the resize subresource), done when the container's status reports it.
resize() {
  k patch pod stack-quota --subresource resize --request-timeout=30s \
    -p "{\"spec\":{\"containers\":[{\"name\":\"app\",\"resources\":{\"requests\":{\"cpu\":\"$1\"},\"limits\":{\"cpu\":\"$2\"}}}]}}" >/dev/null
}
resized() { [[ "$(k get pod stack-quota -o jsonpath='{.status.containerStatuses[0].resources.requests.cpu} {.status.containerStatuses[0].resources.limits.cpu}')" == "$1 $2" ]]; }

declare -A UID_OF CID_OF
k label node $N "$LABEL=" --overwrite >/dev/null
t=$SECONDS
stack_pods >"$STATE/node-stack-pods.yaml"
must "pods stack-quota (Burstable) and stack-isolated (Guaranteed, 1 CPU) created" k apply -f "$STATE/node-stack-pods.yaml"
must "both pods Ready" k wait --for=condition=Ready pod/stack-quota pod/stack-isolated --timeout="${STACK_TIMEOUT:-300}s"
figure stack_pods_ready_s $((SECONDS - t))
for p in stack-quota stack-isolated; do UID_OF[$p]=$(pod_uid $p) CID_OF[$p]=$(pod_cid $p); done
q0=$(podcg stack-quota) i0=$(podcg stack-isolated)
echo "  (before: stack-quota $q0; stack-isolated $i0)"
check "stack-quota throttled by kubelet before the profile (pod and container cpu.max 30000)" \
  [ "$(field "$q0" pod) $(field "$q0" container)" = "30000 30000" ]
check "stack-isolated member of the root partition before (cpuset.cpus.partition member)" [ "$(field "$i0" partition)" = member ]
BEFORE=$(snap)
check "snapshot before the profile ($(wc -l <<<"$BEFORE") values)" bash -c '! grep -q "^error" <<<"$1" && [ -n "$1" ]' _ "$BEFORE"
printf '%s\n' "$BEFORE" >"$STATE/node-stack-before.txt"

t=$SECONDS
stack_profile >"$STATE/node-stack.yaml"
must "apply node-stack (cpus reserved 0, isolated 1-2, partition Isolated; cpuQuota Remove and realtime for default)" k apply -f "$STATE/node-stack.yaml"
gen=$(k get latencyprofile node-stack -o jsonpath='{.metadata.generation}')
check "LatencyNode $N Applied at generation $gen" wait_until "${STACK_TIMEOUT:-300}" ln_applied "$gen"
figure stack_applied_s $((SECONDS - t))
if ! ln_applied "$gen"; then k get latencynode $N -o yaml | sed -n '/^status:/,$p' | head -60 | sed 's/^/    /'; fi
check "stack-quota's quota removed: cpu.max max at pod and container level (guest)" wait_until 120 quota_max stack-quota
check "stack-isolated's quota removed too: cpu.max max at pod and container level (guest)" wait_until 120 quota_max stack-isolated
check "system.slice, user.slice confined to CPU 0 by systemd's AllowedCPUs (guest systemctl show), init.scope by its cpuset.cpus" wait_until 120 confined
echo "  (AllowedCPUs: system.slice=$(unit_cpus system.slice) user.slice=$(unit_cpus user.slice); init.scope cpuset.cpus=$(ask $N /sys/fs/cgroup/init.scope/cpuset.cpus))"
isolated_part() {
  local v cpus; v=$(podcg stack-isolated); cpus=$(field "$v" cpus)
  [[ "$(field "$v" partition)" == isolated && $cpus =~ ^[12]$ && "$(ask $N /sys/fs/cgroup/cpuset.cpus.isolated)" == "$cpus" ]]
}
check "stack-isolated's exclusive CPU an isolated partition (cpuset.cpus.partition isolated, the root's cpuset.cpus.isolated = its CPU)" \
  wait_until 120 isolated_part
i1=$(podcg stack-isolated)
echo "  (stack-isolated: $i1; root cpuset.cpus.isolated: $(ask $N /sys/fs/cgroup/cpuset.cpus.isolated))"
figure stack_tuned_s $((SECONDS - t))

# Real-time at creation: the node says its runtime takes the policy through
# NRI; a granted pod created now runs SCHED_FIFO 10 at the first look at its
# container's process (guest kernel), and the agent's plugin logged that it
# journaled it at StartContainer (set at creation, not by a later pass).
hook_msg() {
  k get latencynode $N -o jsonpath='{.status.conditions[?(@.type=="RuntimeHookConnected")].status} {.status.conditions[?(@.type=="RuntimeHookConnected")].message}'
}
hook_rt() { [[ "$(hook_msg)" == "True "*"real-time policy at creation: set through NRI"* ]]; }
check "RuntimeHookConnected True on $N, saying the runtime takes the real-time policy at creation" wait_until 120 hook_rt
echo "  (RuntimeHookConnected: $(hook_msg))"
t=$SECONDS
stack_rt_pod >"$STATE/node-stack-rt.yaml"
must "pod stack-rt (Guaranteed, 1 CPU, asks fifo:10) created" k apply -f "$STATE/node-stack-rt.yaml"
rt_started() { CID_OF[stack-rt]=$(pod_cid stack-rt); [[ -n ${CID_OF[stack-rt]} ]]; }
must "stack-rt's container started" wait_until "${STACK_TIMEOUT:-300}" rt_started
UID_OF[stack-rt]=$(pod_uid stack-rt)
rt0=$(ask $N "sched ${UID_OF[stack-rt]} ${CID_OF[stack-rt]}")
figure stack_rt_first_look_s $((SECONDS - t))
rt_fifo() { [[ $rt0 == *" policy=1 prio=10" ]]; }
check "stack-rt's process SCHED_FIFO 10 at the first look (guest /proc/PID/stat: $rt0)" rt_fifo
rt_journaled() {
  k -n latencytier-system logs -l app.kubernetes.io/component=agent --tail=-1 --prefix=false 2>/dev/null |
    grep 'Journaled a container started real-time' | grep -q 'default/stack-rt'
}
check "the agent's NRI plugin set it at creation (its log: journaled stack-rt at StartContainer)" wait_until 30 rt_journaled
# Its exclusive CPU goes back to kubelet's shared pool before the deletion
# below compares stack-quota's cpuset with the snapshot taken before.
must "pod stack-rt deleted" k delete pod stack-rt --timeout=120s

t=$SECONDS
w0=$(field "$(podcg stack-quota)" weight)
must "resize stack-quota in place to 200m/400m (kubectl patch --subresource resize)" resize 200m 400m
check "kubelet resized stack-quota (status 200m/400m)" wait_until 120 resized 200m 400m
w1=$(field "$(podcg stack-quota)" weight)
check "kubelet's resize reached the guest's cgroup (container cpu.weight $w0 → $w1)" [ "$w0" != "$w1" ]
check "stack-quota's cpu.max still max at pod and container level after the resize" wait_until 120 quota_max stack-quota
must "resize stack-quota back to 100m/300m" resize 100m 300m
check "kubelet resized stack-quota back (status 100m/300m)" wait_until 120 resized 100m 300m
check "stack-quota's cpu.max still max after the resize back" wait_until 120 quota_max stack-quota
figure stack_resize_s $((SECONDS - t))

t=$SECONDS
k delete latencyprofile node-stack --timeout="${STACK_TIMEOUT:-300}s" >/dev/null || fail "delete node-stack"
# differs BEFORE AFTER: the lines of AFTER that differ from BEFORE, except
# for the two residues the kernel and systemd leave and the agent names in
# its revert result (agent/cpuset.Access, agent/systemd.Write; docs/
# development.md): a populated cgroup's cpuset.cpus, "" before, holds every
# online CPU (kernels before 7.0 refuse to empty it: ENOSPC), and systemd's
# runtime drop-in for a lifted AllowedCPUs stays, empty, until the next boot
# (removing it needs a daemon-reload). Those go to $STATE/node-stack-residue.txt.
differs() {
  local online line path val
  local -A was
  online=$(sed -n 's|^/sys/fs/cgroup/cpuset.cpus.effective=||p' <<<"$1")
  while IFS= read -r line; do was[${line%%=*}]=${line#*=}; done <<<"$1"
  : >"$STATE/node-stack-residue.txt"
  while IFS= read -r line; do
    grep -qxF -- "$line" <<<"$1" && continue
    path=${line%%=*} val=${line#*=}
    if [[ $path == /sys/fs/cgroup/*/cpuset.cpus && -n ${was[$path]+set} && -z ${was[$path]} && $val == "$online" ]] ||
      [[ $line =~ ^/run/systemd/system\.control/(system|user)\.slice\.d/50-AllowedCPUs\.conf:.*AllowedCPUs=\ *$ ]]; then
      echo "$line" >>"$STATE/node-stack-residue.txt"
      continue
    fi
    echo "after: $line"
  done <<<"$2"
  while IFS= read -r line; do
    grep -qxF -- "$line" <<<"$2" && continue
    grep -q -- "^${line%%=*}=" <<<"$2" || echo "gone: $line"
  done <<<"$1"
}
same_as_before() { [[ -z "$(differs "$BEFORE" "$(snap)")" ]]; }
if wait_until "${STACK_TIMEOUT:-300}" same_as_before; then
  pass "after the deletion: kernel values, cgroup files and systemd properties as before ($(wc -l <<<"$BEFORE") values, guest; $(wc -l <"$STATE/node-stack-residue.txt") named residues)"
  sed 's/^/    residue: /' "$STATE/node-stack-residue.txt"
else
  fail "after the deletion the guest's snapshot differs from before"
  differs "$BEFORE" "$(snap)" | sed 's/^/    /'
fi
figure stack_reverted_s $((SECONDS - t))
k delete pod stack-quota stack-isolated --wait=false >/dev/null 2>&1 || true
k label node $N "$LABEL-" >/dev/null 2>&1 || true
