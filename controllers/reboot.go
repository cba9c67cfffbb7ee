package controllers

import "latencytier.io/latencytier/controllers/planner"

// Managed reboots (issue 26), the decision half, lives in the planner
// (planner/reboot.go and planner/release.go: pure, no client). The names
// below keep the reconcilers' code as it reads until the executor (issue
// 42) takes the plan whole; reboot_controller.go gathers the inputs and
// reboot_act.go carries each act out.

// rebootAct is what a node's managed reboot does next.
type rebootAct = planner.Act

const (
	rebootWait     = planner.Wait
	rebootStart    = planner.Start
	rebootDrain    = planner.Drain
	rebootRequest  = planner.Request
	rebootVerify   = planner.Verify
	rebootFinish   = planner.Finish
	rebootAbandon  = planner.Abandon
	rebootStall    = planner.Stall
	rebootWithdraw = planner.Withdraw
)

// nodeClass is a node's place in the rollout of the target revision.
type nodeClass = planner.Class

const (
	classWaiting   = planner.ClassWaiting
	classVerifying = planner.ClassVerifying
	classPassed    = planner.ClassPassed
	classFailed    = planner.ClassFailed
)

const (
	defaultDrainTimeout = planner.DefaultDrainTimeout
	defaultBootTimeout  = planner.DefaultBootTimeout
	backSuffix          = planner.BackSuffix
	withdrawGrace       = planner.WithdrawGrace
)

type (
	rebootView   = planner.RebootView
	rebootLimits = planner.Limits
)

var (
	rebootsAllowed     = planner.RebootsAllowed
	backRevision       = planner.BackRevision
	isBack             = planner.IsBack
	unstagedForReboot  = planner.UnstagedForReboot
	stagedForReboot    = planner.StagedForReboot
	startable          = planner.Startable
	nextReboot         = planner.NextReboot
	rebootCounts       = planner.RebootCounts
	sortedLatencyNodes = planner.SortedLatencyNodes
	withdrawn          = planner.Withdrawn
	requestOutstanding = planner.RequestOutstanding
	recordOf           = planner.RecordOf
	bootTimeoutOf      = planner.BootTimeoutOf
)
