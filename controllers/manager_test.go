package controllers

import (
	"testing"

	"latencytier.io/latencytier/internal/metricsauth"
)

func TestMetricsSecureByDefault(t *testing.T) {
	tests := []struct {
		args       []string
		wantSecure bool
	}{
		{nil, true},
		{[]string{"--metrics-secure=false"}, false},
	}
	for _, tt := range tests {
		f, err := parseManagerFlags(tt.args)
		if err != nil {
			t.Fatal(err)
		}
		o, err := metricsauth.ServerOptions(f.metricsAddr, f.metricsSecure, f.metricsCertDir)
		if err != nil {
			t.Fatal(err)
		}
		if o.SecureServing != tt.wantSecure || (o.FilterProvider != nil) != tt.wantSecure {
			t.Errorf("%v: secure serving %v with filter %v, want %v", tt.args, o.SecureServing, o.FilterProvider != nil, tt.wantSecure)
		}
	}
}
