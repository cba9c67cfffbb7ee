// Package logging is the one log setup of every latencytier subcommand: the
// same logr backend (controller-runtime's zap), the same format flag
// (--log-format=json|text, JSON by default) and the same verbosity flags
// (--v=N and its spelled-out twin --log-level=error|info|debug|N), so the
// manager's and the agents' lines can be read by one parser.
package logging

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime/pkg/log"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Formats --log-format accepts.
const (
	FormatJSON = "json"
	FormatText = "text"
)

// Options are the logging flags' values. The zero value logs JSON at
// verbosity 0 (Info and Error lines, no V(1) and above).
type Options struct {
	// Format is FormatJSON (the default when empty) or FormatText.
	Format string
	// Verbosity is the highest logr V-level logged; -1 logs errors only.
	Verbosity int
}

// AddFlags registers --log-format, --v and --log-level on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Var((*formatValue)(&o.Format), "log-format", "log line format: json (one JSON object per line) or text (human-readable columns)")
	fs.VarP((*verbosityValue)(&o.Verbosity), "v", "v", "log verbosity: 0 logs Info and Error lines, each step up adds V(n) detail (same setting as --log-level)")
	fs.Var((*levelValue)(&o.Verbosity), "log-level", "log level: error, info, debug (= --v=1) or a verbosity number (same setting as --v)")
}

// Install returns New(w) after making it the logger of controller-runtime
// and of client-go (klog) too, so their lines (leader election, watches,
// the metrics server) have the same format as the command's own.
func (o Options) Install(w io.Writer) logr.Logger {
	log := o.New(w)
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	return log
}

// New returns the logger the options describe, writing to w.
func (o Options) New(w io.Writer) logr.Logger {
	// Times as RFC 3339 in both formats (zap's JSON default is epoch
	// seconds, which neither people nor kubectl logs --since-time read).
	rfc3339 := func(c *zapcore.EncoderConfig) { c.EncodeTime = zapcore.RFC3339NanoTimeEncoder }
	enc := crzap.JSONEncoder(rfc3339)
	if o.Format == FormatText {
		enc = crzap.ConsoleEncoder(rfc3339)
	}
	return crzap.New(crzap.WriteTo(w), crzap.UseDevMode(false), enc,
		crzap.Level(zapcore.Level(-o.Verbosity)),
		// Stack traces only for errors the code did not expect (panics):
		// an Error line is a report, not a crash.
		crzap.StacktraceLevel(zapcore.DPanicLevel))
}

type formatValue string

func (f *formatValue) String() string {
	if *f == "" {
		return FormatJSON
	}
	return string(*f)
}

func (f *formatValue) Set(s string) error {
	switch s {
	case FormatJSON, FormatText:
		*f = formatValue(s)
		return nil
	}
	return fmt.Errorf("%q is not a log format: want %s or %s", s, FormatJSON, FormatText)
}

func (f *formatValue) Type() string { return "format" }

type verbosityValue int

func (v *verbosityValue) String() string { return strconv.Itoa(int(*v)) }

func (v *verbosityValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a verbosity: want a number 0 or more", s)
	}
	*v = verbosityValue(n)
	return nil
}

func (v *verbosityValue) Type() string { return "int" }

type levelValue int

func (l *levelValue) String() string {
	switch *l {
	case -1:
		return "error"
	case 0:
		return "info"
	case 1:
		return "debug"
	}
	return strconv.Itoa(int(*l))
}

func (l *levelValue) Set(s string) error {
	switch strings.ToLower(s) {
	case "error":
		*l = -1
		return nil
	case "info":
		*l = 0
		return nil
	case "debug":
		*l = 1
		return nil
	}
	if err := (*verbosityValue)(l).Set(s); err != nil {
		return fmt.Errorf("%q is not a log level: want error, info, debug or a number 0 or more", s)
	}
	return nil
}

func (l *levelValue) Type() string { return "level" }
