package nri

import (
	"context"
	"fmt"

	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/go-logr/logr"
)

// SetLog sends the NRI library's own log (the stub's registration and
// connection lines) to log, at V(1) but for warnings and errors, instead of
// logrus on stderr. It sets a process-wide logger: call it once, at start.
func SetLog(log logr.Logger) { nrilog.Set(logAdapter{log.WithName("nri")}) }

type logAdapter struct{ l logr.Logger }

func (a logAdapter) Debugf(_ context.Context, format string, args ...any) {
	a.l.V(2).Info(fmt.Sprintf(format, args...))
}

func (a logAdapter) Infof(_ context.Context, format string, args ...any) {
	a.l.V(1).Info(fmt.Sprintf(format, args...))
}

func (a logAdapter) Warnf(_ context.Context, format string, args ...any) {
	a.l.Info(fmt.Sprintf(format, args...))
}

func (a logAdapter) Errorf(_ context.Context, format string, args ...any) {
	a.l.Error(nil, fmt.Sprintf(format, args...))
}
