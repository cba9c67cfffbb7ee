#!/usr/bin/env bash
# burst.sh: the throttling scenario with cpuQuota.policy Burst as the fix:
# the pod keeps its CFS quota and the agent's cpuquota code sets a burst of
# TH_BURST_PERCENT (default 100) of it. With throttling.sh (Remove) it gives
# the rows no fix / Burst / Remove; report.sh compares their "after" p99.
exec env TH_FIX=burst TH_SCENARIO=burst "$(dirname "$0")/throttling.sh" "$@"
