#!/usr/bin/env bash
# cluster.sh: a real multi-node cluster on this machine for the end-to-end
# tests: the project's pinned etcd, kube-apiserver, controller-manager and
# scheduler (hack/k8s-binaries.sh) and one emulated VM per node on a Debian
# kernel (hack/vm: 6.1 and 6.12, cgroup v2, systemd), each running
# the pinned containerd 2 (hack/node-runtime.sh; NRI on, runc through
# systemd's cgroups) and the pinned kubelet (systemd cgroup driver), with
# the latencytier, pause and
# workload images imported without a registry.
#
#   hack/cluster/cluster.sh up [NODE...]   # control plane + VMs (default: every node); idempotent
#   hack/cluster/cluster.sh deploy         # helm upgrade --install charts/latencytier, the manager
#                                          # as a process in the netns (its Deployment scaled to 0)
#   hack/cluster/cluster.sh down           # stop everything by PID, delete the netns and state
#   hack/cluster/cluster.sh status
#   hack/cluster/cluster.sh kubectl ...    # kubectl against it (run inside the netns)
#   hack/cluster/cluster.sh ask NODE PATH  # read PATH (/proc/sys/..., /sys/...) in NODE's kernel
#                                          # (or "hog N SECS", "hog stop", "agent pidns": guest-node.sh)
#
# Networking: everything lives in the network namespace $NS that `up`
# creates: a bridge with the control plane's address and one tap per VM on
# it, addresses of 10.229.0.0/24 that exist only there. The control plane's
# processes and qemu run inside it; the host's own namespace gets no link,
# address or route, and `down` deletes the namespace (and with it the
# bridge and taps). The Service range is 10.229.0.0/28, so the `kubernetes`
# Service's ClusterIP is the API server's own address (10.229.0.1:443):
# hostNetwork pods reach it without kube-proxy. Only a loopback CNI config,
# so only hostNetwork pods run (as in hack/local-cluster).
#
# The VMs boot through OVMF and real GRUB (hack/vm/boot-disk.sh's disk, one
# per kernel) under single-threaded TCG (see
# hack/vm/test-kernels.sh for why not multi-threaded), so kernel arguments an
# agent stages through update-grub take effect at the node's next boot. Each
# node boots a qcow2 overlay of the cached image, made by `up` and deleted
# by `down`: what the guest writes (its GRUB configuration, containerd's
# images) lasts across its reboots, never into the cache. The kernel's
# modules come from a read-only 9p share, and the node's files
# (hack/cluster/guest-node.sh as guest.sh, certificates, kubelet, images)
# from a second one.
#
# A guest's reboot is a new qemu process: OVMF's reset hung under TCG (see
# hack/vm/test-kernels.sh), so qemu runs with -no-reboot and a supervisor
# per node (its PID file boot-NAME; qemu's is vm-NAME) starts it again on
# the same disk when the guest's console ended in "reboot: Restarting
# system", and records each boot in $STATE/timing. Any other exit (a power
# off, a crash, `down`) ends the supervisor; `down` stops the supervisors
# first, so none starts a VM again on its way out.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../vm/lib.sh"   # ROOT, VM_CACHE, log, die

STATE="${LATENCYTIER_CLUSTER_STATE:-/var/lib/latencytier-cluster}"
NS="${LATENCYTIER_CLUSTER_NETNS:-latencytier-cluster}"
BR=ltbr0 NET=10.229.0 CP_IP=10.229.0.1 API_PORT=443 ETCD_PORT=2379
API="https://$CP_IP:$API_PORT"
VM_ACCEL="${VM_ACCEL:-tcg,thread=single}"
VM_MEM="${VM_MEM:-2G}" VM_SMP="${VM_SMP:-2}"
OVMF_CODE=/usr/share/OVMF/OVMF_CODE.fd OVMF_VARS=/usr/share/OVMF/OVMF_VARS.fd
# The nodes' root disks: hack/vm/boot-disk.sh's with these packages. None:
# the runtime is hack/node-runtime.sh's containerd 2 and runc, copied in
# through the share at each boot, so the disk is the very image make
# test-kernels' GRUB row boots (one image per kernel in the cache, built
# once for both).
NODE_PACKAGES=""
# CLUSTER_CPU_MANAGER=static: kubelet's static CPU manager (CPU 0
# reserved) on every node, for the node-stack scenario's exclusive CPU.
CPU_MANAGER="${CLUSTER_CPU_MANAGER:-none}"
[[ "$CPU_MANAGER" =~ ^(none|static)$ ]] || { echo "CLUSTER_CPU_MANAGER: none or static" >&2; exit 2; }
# The most boots a node's supervisor starts in one `up`: a guest that keeps
# rebooting is a failure, not a cluster.
MAX_BOOTS=${MAX_BOOTS:-10}
IMAGE="docker.io/library/latencytier:dev"
PAUSE_IMAGE="latencytier.local/pause:1"
WORKLOAD_IMAGE="latencytier.local/workload:1"
KUBECONFIG_ADMIN="$STATE/pki/admin.kubeconfig"
# name | suite series (hack/vm/kernel.sh) | address | tap | MAC
NODES=(
  "node-6-1|bookworm 6.1|$NET.21|lttap1|52:54:00:29:00:21"
  "node-6-12|trixie 6.12|$NET.22|lttap2|52:54:00:29:00:22"
)

clog() { printf '[cluster %s] %s\n' "$(date +%T)" "$*" >&2; }
kbin() { echo "$("$ROOT/hack/k8s-binaries.sh" --print-dir)/$1"; }
inns() { ip netns exec "$NS" "$@"; }
kctl() { inns "$(kbin kubectl)" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
# stamp NAME: host-side time (s since `up` began) and load, for the figures.
stamp() { echo "$1 $(date +%s.%N) $(cut -d' ' -f1-3 /proc/loadavg)" >>"$STATE/timing"; }

# ---------------------------------------------------------------- processes

# start NAME ARGS... runs ARGS inside the netns in its own session, logs to
# $STATE/log/NAME.log and records its PID (ip netns exec execs in place).
start() {
  local name=$1; shift
  if running "$name"; then return; fi
  setsid ip netns exec "$NS" "$@" >"$STATE/log/$name.log" 2>&1 </dev/null &
  echo "$! $(readlink -f "$1")" >"$STATE/pid/$name"
}
running() {
  local f="$STATE/pid/$1" pid bin
  [[ -f "$f" ]] || return 1
  read -r pid bin <"$f"
  [[ -e /proc/$pid/exe && "$(readlink /proc/$pid/exe)" == "$bin" ]]
}
stop() {
  local name=$1 pid i
  if running "$name"; then
    pid=$(awk '{print $1}' "$STATE/pid/$name")
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do running "$name" || break; sleep 0.2; done
    running "$name" && { kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; }
    clog "stopped $name (pid $pid)"
  fi
  rm -f "$STATE/pid/$name"
}
wait_for() {
  local what=$1 secs=$2 i; shift 2
  for ((i = 0; i < secs; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  die "timed out after ${secs}s waiting for $what (logs in $STATE/log)"
}

# ---------------------------------------------------------------- network

netns_up() {
  if ! ip netns list | grep -qw "^$NS"; then
    ip netns add "$NS"
    echo created >"$STATE/netns"
  fi
  ip -n "$NS" link set lo up
  if ! ip -n "$NS" link show "$BR" >/dev/null 2>&1; then
    ip -n "$NS" link add "$BR" type bridge
    ip -n "$NS" addr add "$CP_IP/24" dev "$BR"
  fi
  ip -n "$NS" link set "$BR" up
}

# ---------------------------------------------------------------- certificates

cert() {   # NAME CN ORG EKU [SANS]
  local name=$1 cn=$2 org=$3 eku=$4 san=${5:-} subj="/CN=$2" ext p="$STATE/pki"
  [[ -f "$p/$name.crt" ]] && return
  [[ -n "$org" ]] && subj="/O=$org/CN=$cn"
  ext=$(printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n' "$eku")
  [[ -n "$san" ]] && ext+=$'\n'"subjectAltName=$san"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subj" \
    -keyout "$p/$name.key" -out "$p/$name.csr" 2>/dev/null
  openssl x509 -req -in "$p/$name.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 7 \
    -out "$p/$name.crt" -extfile <(echo "$ext") 2>/dev/null
  rm -f "$p/$name.csr"
}
kubeconfig() {   # NAME USER
  cat >"$STATE/pki/$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster: {server: "$API", certificate-authority: $STATE/pki/ca.crt}
users:
- name: $2
  user: {client-certificate: $STATE/pki/$1.crt, client-key: $STATE/pki/$1.key}
contexts:
- name: cluster
  context: {cluster: cluster, user: $2}
current-context: cluster
KC
}
pki() {
  local p="$STATE/pki"; mkdir -p "$p"
  if [[ ! -f "$p/ca.crt" ]]; then
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 7 \
      -subj "/CN=latencytier-cluster-ca" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
      -keyout "$p/ca.key" -out "$p/ca.crt" 2>/dev/null
  fi
  if [[ ! -f "$p/sa.key" ]]; then
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$p/sa.key" 2>/dev/null
    openssl pkey -in "$p/sa.key" -pubout -out "$p/sa.pub"
  fi
  cert apiserver kube-apiserver "" serverAuth \
    "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:$CP_IP,IP:127.0.0.1"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters clientAuth
  cert admin latencytier-admin system:masters clientAuth
  cert controller-manager system:kube-controller-manager "" clientAuth
  cert scheduler system:kube-scheduler "" clientAuth
  kubeconfig admin latencytier-admin
  kubeconfig controller-manager system:kube-controller-manager
  kubeconfig scheduler system:kube-scheduler
}

# ---------------------------------------------------------------- control plane

control_plane() {
  local p="$STATE/pki"
  start etcd "$(kbin etcd)" --name default --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-cluster "default=http://127.0.0.1:$((ETCD_PORT + 1))" \
    --listen-metrics-urls "http://127.0.0.1:$((ETCD_PORT + 2))" --log-level warn
  wait_for etcd 30 inns curl -fsS "http://127.0.0.1:$ETCD_PORT/health"
  start kube-apiserver "$(kbin kube-apiserver)" \
    --bind-address="$CP_IP" --advertise-address="$CP_IP" --secure-port=$API_PORT \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" --client-ca-file="$p/ca.crt" \
    --kubelet-client-certificate="$p/apiserver-kubelet-client.crt" --kubelet-client-key="$p/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$p/ca.crt" --kubelet-preferred-address-types=InternalIP \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
    --service-cluster-ip-range="$NET.0/28" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --allow-privileged=true --endpoint-reconciler-type=none --profiling=false
  wait_for kube-apiserver 90 kctl get --raw /readyz
  start kube-controller-manager "$(kbin kube-controller-manager)" \
    --kubeconfig="$p/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$p/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$p/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false \
    --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
    --use-service-account-credentials=true \
    --cluster-signing-cert-file="$p/ca.crt" --cluster-signing-key-file="$p/ca.key" \
    --service-cluster-ip-range="$NET.0/28" --profiling=false
  start kube-scheduler "$(kbin kube-scheduler)" \
    --kubeconfig="$p/scheduler.kubeconfig" \
    --authentication-kubeconfig="$p/scheduler.kubeconfig" \
    --authorization-kubeconfig="$p/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false
  wait_for "the default ServiceAccount" 60 kctl -n default get serviceaccount default
}

# ---------------------------------------------------------------- images

# images builds bin/latencytier, the pause binary and hack/bench's workload
# into image tarballs (hack/image), once per `up`.
images() {
  local out="$STATE/images"
  [[ -f "$out/done" ]] && return
  mkdir -p "$out"
  make -s -C "$ROOT" build >&2
  gcc -O2 -Wall -static -pthread -o "$out/workload" "$ROOT/hack/bench/workload.c" -lm
  (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$out/pause" ./hack/image/pause &&
    go run ./hack/image -o "$out/pause.tar" -tag "$PAUSE_IMAGE" -entrypoint /pause -file "$out/pause=/pause" &&
    go run ./hack/image -o "$out/workload.tar" -tag "$WORKLOAD_IMAGE" -entrypoint /workload -file "$out/workload=/workload" &&
    go run ./hack/image -o "$out/latencytier.tar" -tag "$IMAGE" -entrypoint /latencytier \
      -file "$ROOT/bin/latencytier=/latencytier")
  rm -f "$out/workload" "$out/pause"
  touch "$out/done"
}

# ---------------------------------------------------------------- VMs

node_field() {   # NAME FIELD(1-5)
  local row; for row in "${NODES[@]}"; do
    [[ "${row%%|*}" == "$1" ]] && { echo "$row" | cut -d'|' -f"$2"; return; }
  done
  die "no node $1 (nodes: ${NODES[*]%%|*})"
}

# vm_up NAME fills the node's share, makes its disk overlay and starts its
# supervisor, which boots the VM in the netns.
vm_up() {
  local name=$1 kernel ip tap mac kdir initrd bootimg esp share disk
  running "boot-$name" && return
  kernel=$(node_field "$name" 2) ip=$(node_field "$name" 3) tap=$(node_field "$name" 4) mac=$(node_field "$name" 5)
  # shellcheck disable=SC2086
  kdir="$("$ROOT/hack/vm/kernel.sh" $kernel)"
  initrd="$("$ROOT/hack/vm/initramfs.sh" "$kdir")"
  read -r bootimg esp < <("$ROOT/hack/vm/boot-disk.sh" "$kdir" "$initrd" "$NODE_PACKAGES")
  [[ -f "$bootimg" && -d "$esp" ]] || die "$name: no boot disk from hack/vm/boot-disk.sh"
  share="$STATE/nodes/$name"; rm -rf "$share"; mkdir -p "$share"/{pki,bin,images}
  # The disk and the firmware's variables live outside the share: the
  # guest sees only what is in the share.
  disk="$STATE/disks/$name"; rm -rf "$disk"; mkdir -p "$disk"
  qemu-img create -q -f qcow2 -b "$bootimg" -F raw "$disk/root.qcow2"
  cp "$OVMF_VARS" "$disk/vars.fd"
  cp "$HERE/guest-node.sh" "$share/guest.sh"
  printf 'NODE=%s\nIP=%s\nGW=%s\nAPI=%s\nPAUSE_IMAGE=%s\nCPU_MANAGER=%s\n' "$name" "$ip" "$CP_IP" "$API" "$PAUSE_IMAGE" "$CPU_MANAGER" >"$share/node.env"
  cert "kubelet-$name" "system:node:$name" system:nodes clientAuth
  cert "kubelet-serving-$name" "$name" "" serverAuth "DNS:$name,IP:$ip"
  cp "$STATE/pki/ca.crt" "$share/pki/"
  for f in crt key; do
    cp "$STATE/pki/kubelet-$name.$f" "$share/pki/kubelet.$f"
    cp "$STATE/pki/kubelet-serving-$name.$f" "$share/pki/kubelet-serving.$f"
  done
  cp "$(kbin kubelet)" /usr/lib/cni/loopback "$share/bin/"
  mkdir -p "$share/runtime"
  cp "$("$ROOT/hack/node-runtime.sh" --print-dir)"/{containerd,containerd-shim-runc-v2,ctr,runc,crictl} "$share/runtime/"
  cp "$STATE"/images/*.tar "$share/images/"
  if ! ip -n "$NS" link show "$tap" >/dev/null 2>&1; then
    ip -n "$NS" tuntap add dev "$tap" mode tap
    ip -n "$NS" link set "$tap" master "$BR"
  fi
  ip -n "$NS" link set "$tap" up
  # qemu's arguments, one a line, for the supervisor's every boot. The
  # console is appended to, so console.log holds every boot.
  printf '%s\n' -accel "$VM_ACCEL" -cpu max -machine q35 \
    -smp "$VM_SMP" -m "$VM_MEM" -display none -monitor none -no-reboot \
    -chardev "file,id=console,path=$share/console.log,append=on" -serial chardev:console \
    -drive "if=pflash,format=raw,readonly=on,file=$OVMF_CODE" -drive "if=pflash,format=raw,file=$disk/vars.fd" \
    -drive "file=$disk/root.qcow2,if=virtio,format=qcow2" -drive "file=fat:$esp,if=virtio,format=raw,readonly=on" \
    -netdev "tap,id=net0,ifname=$tap,script=no,downscript=no" -device "virtio-net-pci,netdev=net0,mac=$mac" \
    -virtfs "local,path=$share,mount_tag=share,security_model=none,id=share" \
    -virtfs "local,path=$kdir/lib/modules,mount_tag=modules,security_model=none,id=modules,readonly=on" \
    >"$disk/qemu.args"
  stamp "vm-$name-start"
  setsid bash "$HERE/cluster.sh" supervise "$name" >"$STATE/log/boot-$name.log" 2>&1 </dev/null &
  echo "$! $(readlink -f "$(command -v bash)")" >"$STATE/pid/boot-$name"
  clog "$name: booting $(cat "$kdir/release") through GRUB at $ip (console: $share/console.log)"
}

# supervise NAME (the node's supervisor, in a session of its own): boots
# the node's VM, and again each time the guest rebooted, at most MAX_BOOTS
# times. Stopped (TERM), it stops the running qemu first.
supervise() {
  local name=$1 boots=0 rc qpid= qemu args
  local console="$STATE/nodes/$name/console.log"
  qemu=$(command -v qemu-system-x86_64)
  mapfile -t args <"$STATE/disks/$name/qemu.args"
  trap '[[ -n $qpid ]] && kill -TERM "$qpid" 2>/dev/null; wait; exit 0' TERM INT
  while ((boots < MAX_BOOTS)); do
    boots=$((boots + 1))
    stamp "vm-$name-boot-$boots"
    ip netns exec "$NS" "$qemu" "${args[@]}" </dev/null &
    qpid=$!
    echo "$qpid $(readlink -f "$qemu")" >"$STATE/pid/vm-$name"
    rc=0; wait "$qpid" || rc=$?
    stamp "vm-$name-exit-$boots"
    if ! tail -c 4096 "$console" 2>/dev/null | grep -q "reboot: Restarting system"; then
      clog "$name: qemu exited ($rc) after boot $boots, not for a reboot: not started again"
      return 0
    fi
    clog "$name: the guest rebooted (boot $boots); starting it again"
  done
  clog "$name: $MAX_BOOTS boots, not started again"
}

# node_ready NAME waits for the node to register and be Ready, and records
# when it did.
node_ready() {
  local name=$1 i
  for ((i = 0; i < ${NODE_TIMEOUT:-900}; i++)); do
    running "boot-$name" || die "$name: qemu exited (console: $STATE/nodes/$name/console.log)"
    grep -q "Kernel panic" "$STATE/nodes/$name/console.log" 2>/dev/null && die "$name: guest kernel panicked"
    if [[ -f "$STATE/nodes/$name/failed" ]]; then
      sed 's/^/    /' "$STATE/nodes/$name/failed" >&2; die "$name: guest-node.sh failed (above)"
    fi
    if [[ ! -f "$STATE/nodes/$name/registered" ]] && kctl get node "$name" >/dev/null 2>&1; then
      stamp "node-$name-registered"; touch "$STATE/nodes/$name/registered"
    fi
    if kctl wait --for=condition=Ready "node/$name" --timeout=1s >/dev/null 2>&1; then
      stamp "node-$name-ready"; clog "$name: Ready"; return 0
    fi
    sleep 1
  done
  die "$name: not Ready after ${NODE_TIMEOUT:-900}s (console: $STATE/nodes/$name/console.log)"
}

# ask NODE PATH: the value of PATH in NODE's running kernel, read by the
# guest itself (guest-node.sh) and handed back through its 9p share.
ask() {
  local share="$STATE/nodes/$1" id i
  id="q$(date +%s%N)"; mkdir -p "$share/ask" "$share/answer"
  echo "$2" >"$share/ask/.$id"; mv "$share/ask/.$id" "$share/ask/$id"
  for ((i = 0; i < 1800; i++)); do
    if [[ -f "$share/answer/$id" ]]; then cat "$share/answer/$id"; rm -f "$share/answer/$id"; return 0; fi
    sleep 0.1
  done
  die "$1: no answer for $2 within 180s"
}

# ---------------------------------------------------------------- deploy

helm_() {
  [[ -x "$STATE/bin/helm" ]] || (cd "$ROOT" && go build -o "$STATE/bin/helm" helm.sh/helm/v3/cmd/helm)
  inns "$STATE/bin/helm" --kubeconfig "$KUBECONFIG_ADMIN" "$@"
}
# deploy installs the chart (CRDs, RBAC, the agents' DaemonSets, admission
# policies) and runs the manager as a control-plane process in the netns,
# as on a real control-plane node, not as a pod in a guest: in a starved
# emulated guest the manager's pod missed its liveness probes and CRI's
# create deadline and was restarted until the rollout timed out. The chart
# has no value to leave the manager's Deployment out, so it is scaled to 0
# (its pod pinned by a nodeSelector no node has, so none starts in a guest
# before the scale). The process gets the chart's own arguments (read back
# from the Deployment) and the latencytier-manager ServiceAccount's token,
# so RBAC and the admission policies see the identity they would in the
# cluster.
MANAGER_NS=latencytier-system
deploy() {
  kctl apply --server-side --force-conflicts -f "$ROOT/charts/latencytier/crds" >/dev/null
  kctl wait --for=condition=Established crd --all --timeout=60s >/dev/null
  kctl create namespace $MANAGER_NS --dry-run=client -o yaml |
    kctl label --local -f - -o yaml pod-security.kubernetes.io/enforce=privileged | kctl apply -f - >/dev/null
  helm_ upgrade --install latencytier "$ROOT/charts/latencytier" --namespace $MANAGER_NS \
    --set image.pullPolicy=Never --set manager.hostNetwork=true --set image.tag=dev \
    --set-string 'manager.nodeSelector.latencytier\.io/cluster-manager-outside=none' "$@" >/dev/null
  kctl -n $MANAGER_NS scale deploy/latencytier-manager --replicas=0 >/dev/null
  stamp deployed
  manager_start
  wait_for "the manager's /readyz (log: $STATE/log/manager.log)" "${DEPLOY_TIMEOUT:-300}" \
    inns curl -fsS "http://127.0.0.1:$(manager_arg health-probe-bind-address | sed 's/.*://')/readyz"
  stamp manager-ready
  clog "manager running in netns $NS (pid $(awk '{print $1}' "$STATE/pid/manager"), log $STATE/log/manager.log)"
}
# manager_arg NAME: the value of --NAME among the chart's manager arguments.
manager_arg() { sed -n "s/^--$1=//p" "$STATE/manager.args"; }
manager_start() {
  local token args
  stop manager
  kctl -n $MANAGER_NS get deploy latencytier-manager -o jsonpath='{range .spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}' |
    sed "s/\$(POD_NAMESPACE)/$MANAGER_NS/" >"$STATE/manager.args"
  [[ "$(head -1 "$STATE/manager.args")" == manager ]] || die "unexpected manager args: $(cat "$STATE/manager.args")"
  token=$(kctl -n $MANAGER_NS create token latencytier-manager --duration=24h)
  umask 077
  cat >"$STATE/pki/manager.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster: {server: "$API", certificate-authority: $STATE/pki/ca.crt}
users:
- name: latencytier-manager
  user: {token: "$token"}
contexts:
- name: cluster
  context: {cluster: cluster, user: latencytier-manager}
current-context: cluster
KC
  umask 022
  # Its own copy of the binary: a rebuild of bin/ while it runs must not
  # make `running` lose track of it.
  cp "$ROOT/bin/latencytier" "$STATE/bin/latencytier"
  mapfile -t args <"$STATE/manager.args"
  start manager "$STATE/bin/latencytier" "${args[@]}" --kubeconfig="$STATE/pki/manager.kubeconfig"
}

# ---------------------------------------------------------------- commands

cmd_up() {
  [[ $(id -u) -eq 0 ]] || die "needs root (netns, taps, qemu)"
  "$ROOT/hack/install-deps.sh"
  "$ROOT/hack/install-deps.sh" "$ROOT/hack/vm/apt-packages.txt"
  "$ROOT/hack/k8s-binaries.sh" all >/dev/null
  "$ROOT/hack/node-runtime.sh" >/dev/null
  mkdir -p "$STATE"/{log,pid,nodes,bin}
  [[ -f "$STATE/timing" ]] || stamp up-start
  netns_up
  pki
  clog "control plane in netns $NS at $API"
  control_plane; stamp control-plane-ready
  clog "building images"; images; stamp images-built
  local n names=("$@")
  ((${#names[@]})) || names=("${NODES[@]%%|*}")
  for n in "${names[@]}"; do vm_up "$n"; done
  for n in "${names[@]}"; do node_ready "$n"; done
  clog "cluster up: ${names[*]} (kubeconfig $KUBECONFIG_ADMIN, inside netns $NS)"
}

cmd_down() {
  [[ -d "$STATE" ]] || { ip netns list | grep -qw "^$NS" && ip netns del "$NS"; return 0; }
  local f
  # the supervisors first: none may start a VM again
  for f in "$STATE"/pid/boot-* "$STATE"/pid/vm-*; do [[ -e "$f" ]] && stop "$(basename "$f")"; done
  for f in manager kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$f"; done
  if ip netns list | grep -qw "^$NS"; then ip netns del "$NS"; clog "deleted netns $NS"; fi
  rm -rf --one-file-system "$STATE"
}

cmd_status() {
  local f
  for f in "$STATE"/pid/*; do [[ -e "$f" ]] || continue
    if running "$(basename "$f")"; then echo "$(basename "$f"): running"; else echo "$(basename "$f"): stopped"; fi
  done
  running kube-apiserver && { kctl get nodes -o wide; kctl get pods -A -o wide; }
  return 0
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  deploy) shift; deploy "$@" ;;
  status) cmd_status ;;
  kubectl) shift; kctl "$@" ;;
  ask) ask "$2" "$3" ;;
  supervise) supervise "$2" ;;   # vm_up's, not for use by hand
  *) sed -n '2,/^set -e/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2 ;;
esac
