# shellcheck shell=bash disable=SC2154
# Sourced by test.sh (CLUSTER_SCENARIOS): the rolling reboot for boot
# parameters; its helpers and NODES come from there.

say "Rolling reboot for boot parameters: one node at a time, a pod under a PodDisruptionBudget served throughout"
# A profile isolating CPU 1 (CPU 0 reserved) with bootParameters.policy
# Reboot: each node's agent derives nohz_full, rcu_nocbs,
# isolcpus=managed_irq and irqaffinity from it, stages them through
# Debian's GRUB (a drop-in in /etc/default/grub.d, update-grub through
# systemd), and the manager cordons, drains (the Eviction API) and reboots
# one node, verifies it and uncordons it before the rollout (maxInFlight 1,
# and the manager's --max-rebooting 1) moves the other. A 2-replica
# hostNetwork Deployment, one replica per node (required anti-affinity),
# has a PodDisruptionBudget of minAvailable 1: the second node's drain is
# refused (and retried) until the first node's replacement pod is Ready.
#
# Each poll reads the Nodes first and the LatencyNodes second (Applied in
# a boot never turns back to not Applied in that boot, so a taint seen
# lifted in the first read while the second still says not Applied is a
# real violation, not a race of the reads), then the pods and the profile.
# Asserted: never both nodes cordoned; a Ready replica in every row; each
# node cordoned once; the taint on each node in its new boot until its
# LatencyNode reports Applied in that boot, and off after; then from the
# guests' kernels (the 9p share): each node's boot id changed once (the
# guest's own record of its boots, and its kernel's boot_id now), the
# arguments in /proc/cmdline, and CPU 1 in the kernel's nohz_full. The
# profile's judge is not under test here (maxP99Regression 100, a reboot
# changes a guest's run-queue latency a lot; scenario 3 tests the judge).
# Then the profile's deletion: the agents take the drop-in out and run
# update-grub again (the feature reboots nothing for a deletion: the
# running kernels keep the arguments), the guests' GRUB configuration
# loses them, the taint and the cordon are gone; and a reboot of both
# guests by the test brings them up without the arguments.
BOOT_LABEL=latencytier.io/cluster-e2e-boot
ARGS=(nohz_full=1 rcu_nocbs=1 isolcpus=managed_irq,1 irqaffinity=0)
TAINT=latencytier.io/tuning-pending
declare -A boot0=()
for n in "${NODES[@]}"; do
  boot0[$n]=$(ask "$n" /proc/sys/kernel/random/boot_id)
  cmd=$(ask "$n" /proc/cmdline)
  check "$n: booted through GRUB, none of the arguments yet (guest kernel: $cmd)" \
    bash -c "[[ '$cmd' == *BOOT_IMAGE=* && '$cmd' != *nohz_full* ]]"
  kb=$(k get node "$n" -o jsonpath='{.status.nodeInfo.bootID}')
  check "$n: the kubelet's boot id is the guest kernel's (${boot0[$n]})" [ "$kb" = "${boot0[$n]}" ]
  k label node "$n" "$BOOT_LABEL=" --overwrite >/dev/null
done

cat >"$STATE/cluster-pdb.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cluster-pdb
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {app: cluster-pdb}
  template:
    metadata:
      labels: {app: cluster-pdb}
    spec:
      hostNetwork: true
      nodeSelector: {$BOOT_LABEL: ""}
      terminationGracePeriodSeconds: 5
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector:
              matchLabels: {app: cluster-pdb}
            topologyKey: kubernetes.io/hostname
      containers:
      - name: pause
        image: latencytier.local/pause:1
        imagePullPolicy: Never
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: cluster-pdb
  namespace: default
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: cluster-pdb}
YAML
t=$SECONDS
must "apply the cluster-pdb Deployment (2 replicas, one per node) and its PodDisruptionBudget (minAvailable 1)" \
  k apply -f "$STATE/cluster-pdb.yaml"
# pods: "node|ready|name" for the Deployment's pods
pods() {
  k -n default get pods -l app=cluster-pdb \
    -o jsonpath='{range .items[*]}{.spec.nodeName}|{.status.conditions[?(@.type=="Ready")].status}|{.metadata.name}{"\n"}{end}'
}
both_ready() { [[ "$(pods | awk -F'|' '$2 == "True" {print $1}' | sort -u | wc -l)" == 2 ]]; }
must "a Ready replica on each node" wait_until 300 both_ready
pods0=$(pods | awk -F'|' '{print $3}' | sort | xargs)
figure boot_pdb_ready_s $((SECONDS - t))

boot_profile() {
  cat <<YAML
apiVersion: tuning.latencytier.io/v1alpha1
kind: LatencyProfile
metadata:
  name: cluster-boot
spec:
  nodeSelector:
    matchLabels: {$BOOT_LABEL: ""}
  cpus:
    reserved: "0"
    isolated: "1"
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: default}
  bootParameters:
    policy: Reboot
  reboot:
    drainTimeout: 10m
    bootTimeout: 15m
  measurement:
    interval: 10s
    namespaceSelector:         # a rollout's evidence comes only from these namespaces
      matchLabels: {kubernetes.io/metadata.name: default}
  rollout:
    canary: {nodes: 1}         # policy Reboot needs a canary smaller than the selection
    maxInFlight: 1
    verificationWindow: 10s
    maxP99Regression: "100"
    minSamples: 50
    inconclusiveTimeout: 5m
    onInconclusive: Pass
YAML
}
t=$SECONDS
boot_profile >"$STATE/cluster-boot.yaml"
must "apply cluster-boot (CPU 1 isolated, bootParameters.policy Reboot, maxInFlight 1)" k apply -f "$STATE/cluster-boot.yaml"
timeline="$STATE/reboot-timeline.txt"; : >"$timeline"
# row: s since apply, then per node (node-6-1, node-6-12)
# "cordoned,tainted,ready,kubelet boot id (8),applied,agent's boot id (8),boot state,reboot phase",
# then the Ready replicas, the replicas' nodes, the profile's phase and reboots (rebooted/pending)
nodes_row() {
  k get nodes "${NODES[@]}" -o jsonpath='{range .items[*]}{.metadata.name}|{.spec.unschedulable}|{.spec.taints[?(@.key=="'$TAINT'")].effect}|{.status.conditions[?(@.type=="Ready")].status}|{.status.nodeInfo.bootID}{"\n"}{end}'
}
lns_row() {
  k get latencynodes "${NODES[@]}" -o jsonpath='{range .items[*]}{.metadata.name}|{.status.conditions[?(@.type=="Applied")].status}|{.status.boot.bootID}|{.status.boot.state}|{.spec.reboot.phase}{"\n"}{end}'
}
while ((SECONDS - t < ${REBOOT_TIMEOUT:-2400})); do
  ts=$((SECONDS - t))
  nr=$(nodes_row 2>/dev/null || true); lr=$(lns_row 2>/dev/null || true)
  pr=$(pods 2>/dev/null || true)
  st=$(k get latencyprofile cluster-boot -o jsonpath='{.status.rollout.phase} {.status.reboots.rebooted}/{.status.reboots.pending} {.status.reboots.paused}' 2>/dev/null || true)
  row="$ts"
  for n in "${NODES[@]}"; do
    IFS='|' read -r _ cord taint ready kboot < <(grep "^$n|" <<<"$nr" || echo "$n||||")
    IFS='|' read -r _ applied aboot bstate phase < <(grep "^$n|" <<<"$lr" || echo "$n||||")
    row+=" ${cord:-false},${taint:-none},${ready:--},${kboot:0:8},${applied:--},${aboot:0:8},${bstate:--},${phase:--}"
  done
  ready_n=$(awk -F'|' '$2 == "True"' <<<"$pr" | wc -l)
  on=$(awk -F'|' '{printf "%s%s:%s", (NR > 1 ? "+" : ""), ($1 == "" ? "-" : $1), ($2 == "True" ? "R" : "p")}' <<<"$pr")
  read -r phase reb paused <<<"$st"
  echo "$row $ready_n ${on:--} ${phase:--} ${reb:--}" >>"$timeline"
  [[ $phase == Complete && ${reb%%/*} == 2 && $ready_n == 2 && $row != *true,* ]] && break
  [[ $phase == RolledBack || $phase == Failed || $phase == Paused || $paused == true ]] && break
  sleep 2
done
figure boot_rollout_s $((SECONDS - t))
echo "  timeline (s since apply; per node node-6-1, node-6-12: cordoned,taint,Ready,kubelet boot,Applied,agent's boot,boot state,reboot phase; Ready replicas, replicas, phase, rebooted/pending):"
sed 's/^/    /' "$timeline"
k get latencyprofile cluster-boot -o wide || true
k get ln -o wide || true
phase=$(k get latencyprofile cluster-boot -o jsonpath='{.status.rollout.phase}')
check "rollout Complete with both nodes rebooted (phase $phase, reboots $(k get latencyprofile cluster-boot -o jsonpath='{.status.reboots.rebooted} rebooted, {.status.reboots.message}'))" \
  [ "$phase" = Complete ]
check "never both nodes cordoned at once ($(wc -l <"$timeline") rows)" awk '$2 ~ /^true,/ && $3 ~ /^true,/ {exit 1}' "$timeline"
check "a Ready replica of cluster-pdb in every row" awk '$4 < 1 {exit 1}' "$timeline"
col=2
for n in "${NODES[@]}"; do
  # the rows of this node's new boot (the kubelet reports another boot id than the guest's first)
  b0=${boot0[$n]:0:8}
  cordoned=$(awk -v c=$col '{split($c, f, ","); if (f[1] == "true") {print $1; exit}}' "$timeline")
  runs=$(awk -v c=$col '{split($c, f, ","); on = (f[1] == "true"); if (on && !was) r++; was = on} END {print r + 0}' "$timeline")
  check "$n cordoned once (from ${cordoned:-never}s; $runs cordon(s))" [ "$runs" = 1 ]
  newrows=$(awk -v c=$col -v b="$b0" '{split($c, f, ","); if (f[4] != "" && f[4] != b) n++} END {print n + 0}' "$timeline")
  tainted=$(awk -v c=$col -v b="$b0" '{split($c, f, ","); if (f[4] != "" && f[4] != b && f[2] == "NoSchedule") {print $1; exit}}' "$timeline")
  check "$n: tainted $TAINT in its new boot (first at ${tainted:-never}s of $newrows rows in it)" [ -n "$tainted" ]
  # in the new boot: no taint => Applied reported by the agent in that very boot
  early=$(awk -v c=$col -v b="$b0" '{split($c, f, ","); if (f[4] != "" && f[4] != b && f[2] != "NoSchedule" && !(f[5] == "True" && f[6] == f[4])) {print $1; exit}}' "$timeline")
  check "$n: the taint lifted only once Applied was reported in the new boot${early:+ (not at ${early}s)}" [ -z "$early" ]
  lifted=$(awk -v c=$col -v b="$b0" '{split($c, f, ","); if (f[4] != "" && f[4] != b && f[2] != "NoSchedule") {print $1; exit}}' "$timeline")
  figure "boot_${n//-/_}_cordoned_s" "${cordoned:-?}"; figure "boot_${n//-/_}_taint_lifted_s" "${lifted:-?}"
  col=3
done
pods1=$(pods | awk -F'|' '{print $3}' | sort | xargs)
check "both original replicas evicted and replaced ($pods0 -> $pods1)" \
  bash -c "for p in $pods0; do [[ ' $pods1 ' != *\" \$p \"* ]] || exit 1; done"
check "a Ready replica on each node at the end" both_ready
blocked=$(k get events -A --field-selector reason=RebootEvictionBlocked -o name 2>/dev/null | wc -l)
figure boot_eviction_blocked_events "$blocked"

# From the guests' kernels, over their shares.
for n in "${NODES[@]}"; do
  now=$(ask "$n" /proc/sys/kernel/random/boot_id)
  nb=$(wc -l <"$STATE/nodes/$n/boots")
  echo "  ($n's boots, as its kernel recorded them: boot id, command line)"; sed 's/^/    /' "$STATE/nodes/$n/boots"
  check "$n rebooted exactly once: 2 boots recorded by the guest, boot id ${boot0[$n]} -> $now" \
    bash -c "[[ $nb == 2 && '$now' != '${boot0[$n]}' && \$(tail -1 '$STATE/nodes/$n/boots') == '$now '* ]]"
  cmd=$(ask "$n" /proc/cmdline)
  missing=(); for a in "${ARGS[@]}"; do [[ " $cmd " == *" $a "* ]] || missing+=("$a"); done
  check "$n: /proc/cmdline holds ${ARGS[*]} (guest kernel: $cmd)" [ ${#missing[@]} = 0 ]
  nohz=$(ask "$n" /sys/devices/system/cpu/nohz_full) iso=$(ask "$n" /sys/devices/system/cpu/isolated)
  check "$n: the kernel's nohz_full CPUs are 1 (guest kernel: '$nohz')" [ "$nohz" = 1 ]
  # isolcpus=managed_irq isolates no scheduler domain, and isolated lists
  # only those: what the kernel shows must be what the agent reported.
  kiso=$(k get ln "$n" -o jsonpath='{.status.boot.kernelIsolated}')
  check "$n: the kernel's isolated CPUs '$iso' are what the agent reported ('$kiso')" [ "$iso" = "$kiso" ]
done

t=$SECONDS
k delete latencyprofile cluster-boot --timeout=300s >/dev/null || fail "delete cluster-boot"
grub_clean() { local cfg; cfg=$("$C" ask "$1" /boot/grub/grub.cfg); [[ $cfg == *menuentry* && $cfg != *nohz_full* ]]; }
for n in "${NODES[@]}"; do
  check "$n: the arguments gone from /boot/grub/grub.cfg after the deletion (guest's disk)" wait_until 300 grub_clean "$n"
  check "$n: uncordoned and untainted after the deletion" \
    [ -z "$(k get node "$n" -o jsonpath='{.spec.unschedulable}{.spec.taints[?(@.key=="'$TAINT'")].effect}')" ]
  check "$n: not rebooted by the deletion (still 2 boots)" [ "$(wc -l <"$STATE/nodes/$n/boots")" = 2 ]
done
figure boot_revert_s $((SECONDS - t))
k -n default delete -f "$STATE/cluster-pdb.yaml" --wait=false >/dev/null || true
if [[ "${REBOOT_BACK:-1}" == 1 ]]; then
  # The revert takes effect at the next boot: reboot both guests (as a
  # person would) and read their kernels.
  t=$SECONDS
  for n in "${NODES[@]}"; do ask "$n" reboot >/dev/null; done
  # the third boot, and the kubelet Ready in it (not its last status of the second)
  booted3() {
    [[ $(wc -l <"$STATE/nodes/$1/boots") == 3 ]] &&
      [[ "$(k get node "$1" -o jsonpath='{.status.nodeInfo.bootID} {.status.conditions[?(@.type=="Ready")].status}')" == "$(tail -1 "$STATE/nodes/$1/boots" | cut -d' ' -f1) True" ]]
  }
  for n in "${NODES[@]}"; do
    check "$n: back Ready after the test's reboot" wait_until 600 booted3 "$n"
    cmd=$(ask "$n" /proc/cmdline) nohz=$(ask "$n" /sys/devices/system/cpu/nohz_full)
    check "$n: none of the arguments in /proc/cmdline, no nohz_full CPU (guest kernel: $cmd; nohz_full '$nohz')" \
      bash -c "[[ '$cmd' != *nohz_full* && '$cmd' != *isolcpus* && ( '$nohz' == '(null)' || -z '$nohz' ) ]]"
  done
  figure boot_reboot_back_s $((SECONDS - t))
fi
