# checks.sh: the PASS/FAIL bookkeeping and the host-state snapshot shared by
# hack/e2e.sh and hack/holdout.sh (sourced after lib.sh, not run). The
# sourcing script sets failures=() and reports them when it finishes.

pass() { printf '  \033[32mPASS\033[0m %s\n' "$*"; }
fail() { printf '  \033[31mFAIL\033[0m %s\n' "$*"; failures+=("$*"); }
# check DESCRIPTION COMMAND...: records a failure, carries on.
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
# must DESCRIPTION COMMAND...: stops the test (the rest depends on it).
must() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; exit 1; fi; }

# host_state is what the cluster must leave behind exactly as it found it.
host_state() {
  findmnt -n -o PROPAGATION /
  ls -d /sys/fs/cgroup/*/kubepods /run/containerd /opt/containerd /var/log/containers /var/log/pods \
    /var/lib/cni /var/lib/kubelet /var/lib/latencytier-local /run/nri /etc/nri /opt/nri /etc/cdi /run/cdi \
    2>/dev/null || true
  kernel_snapshot
}
