package nri

// WithNRIVersion makes the plugin take v for the NRI version the runtime
// reports: the in-process runtime always reports the module's own.
func WithNRIVersion(v string) Option { return func(p *Plugin) { p.nriVersion = &v } }

// SchedulerSupport is schedulerSupport.
var SchedulerSupport = schedulerSupport
