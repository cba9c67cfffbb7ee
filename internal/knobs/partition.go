package knobs

import "strings"

// partitionMarkdown documents cpus.partition (agent/partition) in
// docs/knobs.md: the files, the write order, what a partition isolates and
// what only the kernel command line does, and the kernel versions.
func partitionMarkdown(b *strings.Builder) {
	b.WriteString("## CPU isolation without a reboot: cpuset partitions\n\n")
	b.WriteString("`spec.cpus.partition` (`None`, the default; `Isolated`; `Root`) makes the exclusive CPUs kubelet's static CPU manager gives a granted pod's container within `cpus.isolated` a cgroup v2 cpuset partition of that container. ")
	b.WriteString("The agent matches a container to its assignment by its cgroup's `cpuset.cpus` (kubelet sets it to exactly the assigned CPUs) against `cpu_manager_state`; containers on the shared pool get none.\n\n")
	b.WriteString("| setting ID | file | value |\n|---|---|---|\n")
	b.WriteString("| `partition/exclusive/kubepods.slice`, `…/kubepods-<qos>.slice`, `…/kubepods-<qos>-pod<uid>.slice`, `…/<container short ID>` (with kubelet's cgroupfs driver `kubepods`, `…/pod<uid>`, …) | `cpuset.cpus.exclusive` of each cgroup from kubepods down to the container | the union of the partitioned CPUs below it |\n")
	b.WriteString("| `partition/<pod slice>/<container short ID>` | the container's `cpuset.cpus.partition` | `isolated` or `root` |\n\n")
	b.WriteString("Writes go top-down (every ancestor's exclusive CPUs before its children's: a child's exclusive CPUs must come from its parent's), then the partition types; everything is journaled first. ")
	b.WriteString("Revert walks back: the types to `member`, then the exclusive CPUs removed bottom-up, so the CPUs return to every other cgroup. ")
	b.WriteString("A partition the kernel holds invalid reads `isolated invalid (<reason>)`: it is reported `Invalid` with the kernel's reason, re-asserted as drift on the next pass, and still reverted to `member` (it is the agent's). ")
	b.WriteString("The request comes from kubelet and pod state and is not trusted: the cgroup path must be a real directory (no symlink, no `..`) of kubepods' container layout and the CPUs a bounded cpulist within `cpus.isolated`, not taken by another partition.\n\n")
	b.WriteString("| isolation | `Isolated` partition | `Root` partition | only at boot |\n|---|---|---|---|\n")
	b.WriteString("| other tasks (system.slice, other pods) off the CPUs | yes: no other cgroup's `cpuset.cpus.effective` keeps them | yes | `isolcpus=` |\n")
	b.WriteString("| scheduler load balancing | none: the CPUs leave every scheduler domain, threads stay where they start | within the partition's CPUs only (a domain of its own) | `isolcpus=domain` |\n")
	b.WriteString("| unbound workqueues | excluded (6.8+) | no | `isolcpus=domain`, `workqueue.unbound_cpus=` |\n")
	b.WriteString("| scheduler tick | no | no | `nohz_full=` |\n")
	b.WriteString("| RCU callbacks | no | no | `rcu_nocbs=` |\n")
	b.WriteString("| managed (per-queue) device IRQs | no | no | `isolcpus=managed_irq` |\n")
	b.WriteString("| movable IRQs | not by the partition: `irq.affinity: Reserved` | same | `irqaffinity=` |\n\n")
	b.WriteString("An `Isolated` partition does no load balancing at all: a container with more runnable threads than CPUs, or threads not each pinned to a CPU, piles them on the CPU they started on (the 6.12 VM row shows two busy tasks staying on one CPU of two for 5 s, while a `Root` partition spreads them). Use `Isolated` for one busy or pinned thread per CPU (DPDK-style pollers), `Root` for multi-threaded pods that do not pin.\n\n")
	b.WriteString("`status.isolation` says per node whether partitions, the system slices' confinement and IRQ steering are `Live`, `Waiting` (partitions asked for and supported, but no granted pod holds isolated CPUs yet), `Off`, `Unsupported` or `Failed`, and `needsBoot` lists the goals (`Tick`, `RCUCallbacks`, `ManagedIRQs`) the command line does not give yet; `kubectl get ln -o wide` shows both.\n\n")
	b.WriteString("Kernel versions (Documentation/admin-guide/cgroup-v2.rst, \"Cpuset Interface Files\"; commit titles in the kernel's cgroup tree):\n\n")
	b.WriteString("- 6.1: the `isolated` partition type (\"cgroup/cpuset: Add a new isolated cpus.partition type\") and the invalid reason (\"cgroup/cpuset: Show invalid partition reason string\"); partitions only as children of partition roots, so not below kubepods.\n")
	b.WriteString("- 6.7: `cpuset.cpus.exclusive` (\"cgroup/cpuset: Add cpuset.cpus.exclusive for v2\") and remote partitions below non-partition ancestors (\"cgroup/cpuset: Introduce remote partition\"): what kubelet's tree needs. Without the file (Debian 6.1) or on cgroup v1 the partition is `Unsupported` with the reason and nothing is written.\n")
	b.WriteString("- 6.8: the root's `cpuset.cpus.isolated` (\"cgroup/cpuset: Expose cpuset.cpus.isolated\") and isolated CPUs taken out of the unbound workqueues' cpumask (\"cgroup/cpuset: Take isolated CPUs out of workqueue unbound cpumask\").\n")
	b.WriteString("- Tick, RCU callbacks and managed IRQs need `nohz_full=`, `rcu_nocbs=` and `isolcpus=managed_irq` on every kernel so far.\n\n")
}
