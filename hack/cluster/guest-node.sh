#!/bin/sh
# guest-node.sh runs inside a cluster VM as root, as the share's guest.sh
# (hack/vm/guest-boot.sh starts it from latencytier-vmtest.service). The
# share (/mnt/share) holds what hack/cluster/cluster.sh put there: node.env
# (NODE, IP, GW, API, PAUSE_IMAGE, CPU_MANAGER), pki/, bin/ (kubelet, the
# CNI loopback plugin), runtime/ (hack/node-runtime.sh's containerd 2,
# shim, ctr, runc, crictl), images/*.tar. It brings up the VM's tap link,
# installs the runtime with containerd's own systemd unit and a version 3
# config (NRI on, runc through systemd's cgroups), imports the images (no
# registry) and starts
# the pinned kubelet as a systemd unit; then it answers kernel reads the
# host asks for in ask/ (one file per question, naming a /proc/sys or /sys
# path) in answer/, so the tests read the guest's kernel, not a status; and
# starts or stops a CPU hog on request ("hog N SECS", "hog stop"), says
# in which PID namespace the agent runs ("agent pidns"), and reboots the
# node ("reboot"); and reads a pod's cgroup files ("pod UID CID"), a
# unit's systemd property ("unit UNIT PROP") or a whole snapshot of what a
# profile may touch ("snapshot UID...") for make test-node-stack.
#
# It runs at every boot of the node (its disk lasts across reboots: the
# cluster's nodes boot through GRUB, so staged kernel arguments take
# effect), so what it does is done again or skipped when done: the images
# are imported once. Each boot appends its boot id and command line, read
# from the kernel, to the share's boots file.
set -eu
S=/mnt/share
. $S/node.env
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
stamp() { echo "$1 $(cut -d' ' -f1 /proc/uptime)" >>$S/timing; }
say() { echo "cluster-node: $*" >/dev/console; }
stamp guest-start
# Any failure of this script is the host's to see at once (node_ready reads
# the share's failed file), not after its wait for a Ready node runs out.
trap 'rc=$?; [ $rc = 0 ] || echo "guest-node.sh exited $rc at $(cut -d" " -f1 /proc/uptime) s (console.log has its output)" >>$S/failed' EXIT
echo "$(cat /proc/sys/kernel/random/boot_id) $(cat /proc/cmdline)" >>$S/boots

# pod_dir UID: the pod's cgroup (kubelet's systemd driver: kubepods.slice/
# [kubepods-<qos>.slice/]kubepods[-<qos>]-pod<uid_>.slice).
pod_dir() {
  case "$1" in *[!0-9a-f-]*|"") echo "bad pod uid $1"; return 1 ;; esac
  d="$(find /sys/fs/cgroup/kubepods.slice -maxdepth 2 -type d -name "kubepods*-pod$(echo "$1" | tr - _).slice" | head -1)"
  [ -n "$d" ] || { echo "no cgroup for pod $1"; return 1; }
  echo "$d"
}
pod_files() {
  d="$(pod_dir "$1")" || { echo "$d"; return 1; }
  case "$2" in *[!0-9a-f]*|"") echo "bad container id $2"; return 1 ;; esac
  c="$d/cri-containerd-$2.scope"
  [ -d "$c" ] || { echo "no cgroup for container $2"; return 1; }
  echo "pod=$(cut -d' ' -f1 "$d/cpu.max") container=$(cut -d' ' -f1 "$c/cpu.max") partition=$(cat "$c/cpuset.cpus.partition") cpus=$(cat "$c/cpuset.cpus.effective") weight=$(cat "$c/cpu.weight")"
}
# pod_sched UID CID: the scheduling policy (stat field 41) and real-time
# priority (field 40) of the container's first process, as
# "pid=<pid> policy=<n> prio=<n>" (policy 1 SCHED_FIFO, 2 SCHED_RR, 0 other).
pod_sched() {
  d="$(pod_dir "$1")" || { echo "$d"; return 1; }
  case "$2" in *[!0-9a-f]*|"") echo "bad container id $2"; return 1 ;; esac
  pid="$(sort -n "$d/cri-containerd-$2.scope/cgroup.procs" 2>/dev/null | head -1)"
  [ -n "$pid" ] || { echo "no process in container $2"; return 1; }
  st="$(cat /proc/"$pid"/stat)" || return 1
  set -- ${st##*) }   # $1 is field 3: field N is ${N-2}
  shift 37
  echo "pid=$pid policy=$2 prio=$1"
}
# snapshot UID...: the kernel's scheduler and IRQ values, the cgroup
# files of the root's children, the QoS slices and the named pods (every
# cgroup under them), the systemd properties of the units the agent
# confines and the runtime drop-ins systemd keeps for them. Sorted, one
# "name=value" a line.
snapshot() {
  # Each value is read with the shell's own read (no process per value:
  # under emulation a fork costs tens of milliseconds, and the snapshot
  # reads ~170 values); multi-line files (drop-ins) are joined by tr.
  for f in /proc/sys/kernel/sched_autogroup_enabled /proc/sys/kernel/numa_balancing \
    /proc/sys/kernel/sched_rt_runtime_us /proc/sys/vm/swappiness /proc/irq/default_smp_affinity \
    /sys/fs/cgroup/cpuset.cpus.isolated /sys/fs/cgroup/cpuset.cpus.effective /proc/cmdline /proc/irq/[0-9]*/smp_affinity_list; do
    [ -r "$f" ] && snapval "$f"
  done
  dirs="$(find /sys/fs/cgroup -mindepth 1 -maxdepth 1 -type d; find /sys/fs/cgroup/kubepods.slice -mindepth 1 -maxdepth 1 -type d -name 'kubepods-*.slice' ! -name '*-pod*')"
  for u in "$@"; do d="$(pod_dir "$u")" || { echo "$d"; return 1; }; dirs="$dirs $(find "$d" -type d)"; done
  for d in $dirs; do
    for f in cpu.max cpu.weight cpuset.cpus cpuset.cpus.effective cpuset.cpus.exclusive cpuset.cpus.partition cpuset.mems; do
      [ -r "$d/$f" ] && snapval "$d/$f"
    done
  done
  # one systemctl for the five units, a line each ("systemd UNIT P=V P=V ...")
  systemctl show -p Id -p AllowedCPUs -p StartupAllowedCPUs -p AllowedMemoryNodes -p CPUWeight -p CPUQuotaPerSecUSec \
    -- -.slice system.slice user.slice init.scope kubepods.slice |
    awk '/^Id=/ {id=substr($0, 4); next} /^$/ {if (id != "") print "systemd " id line; id=""; line=""; next} {line=line " " $0}
      END {if (id != "") print "systemd " id line}'
  for f in $(find /run/systemd/system.control /etc/systemd/system.control -type f 2>/dev/null); do
    echo "$f: $(tr '\n' ' ' <"$f")"
  done
}
# snapval FILE: "FILE=<its first line>", read by the shell itself.
snapval() {
  sv=""
  IFS= read -r sv <"$1" || true
  echo "$1=$sv"
}

# Kernel reads for the host: ask/ID names a path under /proc/sys or /sys,
# /proc/cmdline or /boot/grub/grub.cfg (or a hog request, above);
# answer/ID gets "value" (written to a temporary name, then renamed, so the
# host never reads half an answer).
answer() {
mkdir -p $S/ask $S/answer
while :; do
  for q in $S/ask/*; do
    [ -f "$q" ] || continue
    id="$(basename "$q")"; p="$(cat "$q")"
    case "$p" in
      /proc/sys/*|/sys/*|/proc/cmdline|/boot/grub/grub.cfg) v="$(cat "$p" 2>&1 | tr '\t' ' ')" || v="error: $v" ;;
      # "hog N SECS": N busy loops for at most SECS seconds, a noisy
      # neighbour for the rollback scenario; "hog stop" ends them. They run
      # in a transient unit of their own at CPUWeight 10000 (the default
      # is 100): with cgroup v2's CPU controller on, loops in this script's
      # own service only got that service's share against kubelet's and
      # the pods' slices, and the canary's p99 rose 1.5-3.7x, under the
      # scenario's 4x gate. The answer is how many loops run.
      "hog stop") systemctl stop latencytier-hog.service 2>/dev/null || true; v=0 ;;
      hog\ *)
        set -- $p
        if systemd-run --quiet --unit=latencytier-hog --collect -p CPUWeight=10000 -p RuntimeMaxSec="$3" \
          sh -c 'for i in $(seq 1 "$1"); do (while :; do :; done) & done; wait' hog "$2"; then v="$2"; else v="error: systemd-run"; fi ;;
      # "agent pidns": for each latencytier process, "host" when it is in
      # the guest's own PID namespace (PID 1's, the hostPID agent) or "pod"
      # when in one of its own (the standard agent); "none" when none runs.
      "agent pidns")
        v=""
        for pid in $(pgrep -x latencytier || true); do
          if [ "$(readlink /proc/$pid/ns/pid)" = "$(readlink /proc/1/ns/pid)" ]; then v="$v host"; else v="$v pod"; fi
        done
        v="${v# }"; [ -n "$v" ] || v=none ;;
      # "reboot": an orderly reboot (systemd), after the answer is out.
      reboot) v=rebooting; (sleep 1; systemctl reboot) >/dev/null 2>&1 & ;;
      # "unit UNIT PROPERTY": systemd's value of a property of one of the
      # units the agent confines (systemctl show), e.g. AllowedCPUs.
      unit\ *)
        set -- $p
        case "$2" in
          -.slice|system.slice|user.slice|init.scope|kubepods.slice)
            case "$3" in *[!A-Za-z]*|"") v="error: refused property $3" ;; *) v="$(systemctl show "$2" -p "$3" --value 2>&1)" ;; esac ;;
          *) v="error: refused unit $2" ;;
        esac ;;
      # "pod UID CID": a pod's cgroup files (systemd driver) as
      # "pod=<cpu.max quota> container=<its container's> partition=<the
      # container's cpuset.cpus.partition> cpus=<its cpuset.cpus.effective>
      # weight=<its cpu.weight>".
      pod\ *)
        set -- $p
        v="$(pod_files "$2" "$3" 2>&1)" || v="error: $v" ;;
      # "sched UID CID": the container's first process's scheduling policy
      # and real-time priority (pod_sched).
      sched\ *)
        set -- $p
        v="$(pod_sched "$2" "$3" 2>&1)" || v="error: $v" ;;
      # "snapshot UID...": every value the node-stack scenario's profile may
      # touch, one a line, for a byte-for-byte comparison (snapshot).
      snapshot|snapshot\ *)
        set -- $p; shift
        if v="$(snapshot "$@" 2>&1)"; then v="$(echo "$v" | LC_ALL=C sort)"; else v="error: $v"; fi ;;
      *) v="error: refused path $p" ;;
    esac
    echo "$v" >"$S/answer/.$id"; mv "$S/answer/.$id" "$S/answer/$id"; rm -f "$q"
  done
  sleep 0.5
done
}
# Answered from the start of each boot, not after the kubelet's start: a
# test that asks across a reboot waits for the boot, not for containerd.
answer &

# The root disk has no /lib/modules (the initramfs loads the disk's own
# chain): the kernel's modules come read-only from a second 9p share.
mkdir -p /lib/modules
mount -t 9p -o trans=virtio,version=9p2000.L,ro modules /lib/modules
for m in virtio_net overlay; do modprobe $m; done

# udev renames the NIC (eth0 → enp0s…): take its name once udev is done.
udevadm settle -t 60 || true
i=0
while :; do
  dev="$(ls /sys/class/net | grep -v '^lo$' | head -1)"
  [ -n "$dev" ] && break
  i=$((i + 1)); [ $i -lt 100 ] || { say "no network device"; exit 1; }
  sleep 0.1
done
hostname "$NODE"; echo "$NODE" >/etc/hostname
grep -qx "$IP $NODE" /etc/hosts || echo "$IP $NODE" >>/etc/hosts
ip link set lo up
ip addr add "$IP/24" dev "$dev"
ip link set "$dev" up
ip route add default via "$GW"
: >/etc/resolv.conf
stamp network-up

mkdir -p /etc/containerd /etc/cni/net.d /opt/cni/bin /etc/kubernetes/pki /var/lib/kubelet
cp $S/bin/loopback /opt/cni/bin/loopback
echo '{"cniVersion":"1.0.0","name":"lo-only","plugins":[{"type":"loopback"}]}' >/etc/cni/net.d/10-lo-only.conflist
# The runtime is hack/node-runtime.sh's (containerd 2, its runc shim, ctr,
# runc, crictl; static binaries), from the share's runtime/, not Debian's
# packages (bookworm's containerd 1.6 has no NRI and is past its end of
# life): installed at each boot, so a node's disk never runs an older pin.
for b in containerd containerd-shim-runc-v2 ctr runc crictl; do install -m 755 $S/runtime/$b /usr/local/bin/$b; done
# containerd's configuration, version 3 (containerd 2's own schema), with
# NRI on at its default socket and runc driven through systemd's cgroups,
# as kubelet's systemd cgroup driver needs.
cat >/etc/containerd/config.toml <<CFG
version = 3
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '$PAUSE_IMAGE'
[plugins.'io.containerd.cri.v1.runtime']
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '/usr/local/bin/runc'
        SystemdCgroup = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/opt/cni/bin']
    conf_dir = '/etc/cni/net.d'
[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = '/var/run/nri/nri.sock'
CFG
echo 'runtime-endpoint: unix:///run/containerd/containerd.sock' >/etc/crictl.yaml
# containerd's own unit (upstream's containerd.service, paths ours).
cat >/etc/systemd/system/containerd.service <<UNIT
[Unit]
Description=containerd container runtime (hack/node-runtime.sh)
After=network.target local-fs.target
[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/local/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
OOMScoreAdjust=-999
[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl restart containerd || true   # its status and log are reported below
# Up within 180 s of the guest's clock (an emulated guest's exec is slow,
# so a deadline, not a count of tries); on failure its unit's status and
# log go to the share's failed file, which the host's node_ready reports.
t0=$(cut -d. -f1 /proc/uptime)
until ctr version >/dev/null 2>&1; do
  if [ $(($(cut -d. -f1 /proc/uptime) - t0)) -gt 180 ]; then
    { echo "containerd did not start within 180 s"; systemctl status containerd --no-pager -l 2>&1 | tail -20
      journalctl -u containerd --no-pager 2>&1 | tail -40; } >$S/failed
    say "containerd did not start"; exit 1
  fi
  sleep 1
done
# What runs, for the host's checks: crictl's version report and NRI's socket.
{ crictl version 2>&1; [ -S /var/run/nri/nri.sock ] && echo "NRI socket: /var/run/nri/nri.sock"; } >$S/.runtime && mv $S/.runtime $S/runtime.txt
stamp containerd-up
# containerd keeps them on the disk: imported at the first boot only
if [ ! -f /var/lib/cluster-node-images ]; then
  for t in $S/images/*.tar; do ctr -n k8s.io images import "$t" >/dev/null; done
  touch /var/lib/cluster-node-images
fi
stamp images-imported

cp $S/pki/* /etc/kubernetes/pki/
cat >/etc/kubernetes/kubelet.kubeconfig <<CFG
apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster: {server: "$API", certificate-authority: /etc/kubernetes/pki/ca.crt}
users:
- name: node
  user: {client-certificate: /etc/kubernetes/pki/kubelet.crt, client-key: /etc/kubernetes/pki/kubelet.key}
contexts:
- name: cluster
  context: {cluster: cluster, user: node}
current-context: cluster
CFG
cat >/etc/kubernetes/kubelet.yaml <<CFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $IP
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: systemd
failSwapOn: false
tlsCertFile: /etc/kubernetes/pki/kubelet-serving.crt
tlsPrivateKeyFile: /etc/kubernetes/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: /etc/kubernetes/pki/ca.crt}
authorization: {mode: Webhook}
evictionHard: {memory.available: 50Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: /etc/resolv.conf
CFG
# CPU_MANAGER=static (make test-node-stack): kubelet's static CPU manager
# with CPU 0 reserved, so a Guaranteed pod gets an exclusive CPU the agent
# can make a partition of.
if [ "${CPU_MANAGER:-none}" = static ]; then
  printf 'cpuManagerPolicy: static\nreservedSystemCPUs: "0"\n' >>/etc/kubernetes/kubelet.yaml
fi
install -m 755 $S/bin/kubelet /usr/local/bin/kubelet
systemd-run --unit=kubelet --property=Restart=always --property=RestartSec=2 \
  /usr/local/bin/kubelet --config=/etc/kubernetes/kubelet.yaml \
  --kubeconfig=/etc/kubernetes/kubelet.kubeconfig --hostname-override="$NODE" --node-ip="$IP" --v=1
stamp kubelet-started
say "kubelet started for $NODE ($IP)"
wait
