// Package vmtest holds the agent's tests that need a real kernel with
// systemd as init: Debian 6.1 (CFS), 6.12 and 7.3 (EEVDF; 7.3 with
// sched_ext) kernels on cgroup v2 and v1, booted in emulated VMs by
// `make test-kernels` (hack/vm). They are built only with the privileged
// tag and skip unless LATENCYTIER_VM=1 (set by the guest's runner), because
// they remount debugfs, confine system.slice and reboot the machine.
package vmtest
