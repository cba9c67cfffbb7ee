// Command quotafix removes, and restores, the CFS quota of one opted-in pod
// through the agent's own code path (podcgroup.Find → cpuquota.Knobs →
// apply.Engine with its journal), for the throttling benchmark; with
// -policy burst it keeps the quota and sets a CFS burst instead
// (cpuquota.BurstKnobs), for the burst benchmark. The agent's
// one-shot CLI learns pods from the API server; this benchmark has no API
// server, so it names the pod by UID and kubepods root instead.
//
// Usage:
//
//	quotafix apply -kubepods kubepods-bench -uid <pod uid> [-policy remove|burst] [-percent 100]
//	quotafix revert
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cpuquota"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "quotafix:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: quotafix apply -kubepods NAME -uid UID | quotafix revert")
	}
	eng := &apply.Engine{Root: host.New("/"), Log: logr.Discard()}
	switch args[0] {
	case "apply":
		return applyQuota(eng, args[1:])
	case "revert":
		rep, err := eng.Revert()
		printResults(rep)
		return err
	default:
		return fmt.Errorf("unknown subcommand %q", args[0])
	}
}

func applyQuota(eng *apply.Engine, args []string) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	kubepods := fs.String("kubepods", podcgroup.DefaultKubepods, "top-level pod cgroup name")
	uid := fs.String("uid", "", "pod UID")
	policy := fs.String("policy", "remove", "remove (the quota) or burst (keep it, add a CFS burst)")
	percent := fs.Int64("percent", v1alpha1.BurstPercentDefault, "with -policy burst: the burst as a percentage of the quota")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pod := podcgroup.Pod{UID: *uid, Namespace: "bench", Name: "workload", QOSClass: "Burstable", OptedIn: true}
	var knobs []knob.Knob
	var failed []v1alpha1.SettingResult
	var err error
	switch *policy {
	case "remove":
		knobs, failed, err = cpuquota.Knobs(eng.Root, []podcgroup.Pod{pod}, podcgroup.WithKubepods(*kubepods))
	case "burst":
		pod.Burst = true
		knobs, failed, err = cpuquota.BurstKnobs(eng.Root, []podcgroup.Pod{pod}, *percent, podcgroup.WithKubepods(*kubepods))
	default:
		return fmt.Errorf("-policy %q: want remove or burst", *policy)
	}
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s: %s", failed[0].Setting, failed[0].Message)
	}
	rep, err := eng.Apply(apply.Meta{Profile: "bench-throttling"}, knobs)
	printResults(rep)
	return err
}

func printResults(rep apply.Report) {
	for _, r := range rep.Results {
		fmt.Printf("%s desired=%s actual=%s state=%s %s\n", r.Setting, r.Desired, r.Actual, r.State, r.Message)
	}
}
