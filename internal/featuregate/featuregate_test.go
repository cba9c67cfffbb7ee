package featuregate

import (
	"flag"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in     string
		tier   bool
		errHas []string // "" = no error
	}{
		{in: "", tier: false},
		{in: "TierScheduler=true", tier: true},
		{in: " TierScheduler = True ", tier: true},
		{in: "TierScheduler=false", tier: false},
		{in: "TierScheduler=1,", tier: true},
		{in: "TierSchedular=true", errHas: []string{`unknown feature gate "TierSchedular"`, "known gates: TierScheduler"}},
		{in: "TierScheduler", errHas: []string{`"TierScheduler" is not Name=true or Name=false`}},
		{in: "TierScheduler=yes", errHas: []string{"TierScheduler=\"yes\"", "must be true or false"}},
		{in: "TierScheduler=true,TierScheduler=false", errHas: []string{"TierScheduler is given twice"}},
	} {
		g, err := Parse(tc.in)
		if len(tc.errHas) > 0 {
			if err == nil {
				t.Errorf("Parse(%q) = %v, want an error", tc.in, g)
				continue
			}
			for _, want := range tc.errHas {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Parse(%q): %q does not say %q", tc.in, err, want)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if g.Enabled(TierScheduler) != tc.tier {
			t.Errorf("Parse(%q): TierScheduler %v, want %v", tc.in, g.Enabled(TierScheduler), tc.tier)
		}
	}
}

// The zero value has every gate off; String round-trips through Parse.
func TestZeroAndString(t *testing.T) {
	var zero Gates
	for _, x := range Known {
		if zero.Enabled(x) {
			t.Errorf("zero Gates has %s on", x)
		}
	}
	on := zero.With(TierScheduler, true)
	if zero.Enabled(TierScheduler) {
		t.Error("With changed the receiver")
	}
	back, err := Parse(on.String())
	if err != nil || !back.Enabled(TierScheduler) || on.String() != "TierScheduler=true" {
		t.Errorf("String %q parsed back to %v, %v", on.String(), back, err)
	}
}

// Through pflag (the manager) and the standard flag package, an unknown
// gate's error names the flag as well as the gate.
func TestFlagErrorsNameTheFlag(t *testing.T) {
	var g Gates
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	fs.Var(Value{&g}, Flag, Usage())
	err := fs.Parse([]string{"--feature-gates=Tier=true"})
	if err == nil || !strings.Contains(err.Error(), "--feature-gates") || !strings.Contains(err.Error(), `unknown feature gate "Tier"`) {
		t.Errorf("pflag: %v", err)
	}
	if err := fs.Parse([]string{"--feature-gates=TierScheduler=true"}); err != nil || !g.Enabled(TierScheduler) {
		t.Errorf("pflag: %v, gates %v", err, g)
	}
	std := flag.NewFlagSet("agent", flag.ContinueOnError)
	std.SetOutput(new(strings.Builder))
	var g2 Gates
	std.Var(Value{&g2}, Flag, Usage())
	if err := std.Parse([]string{"-feature-gates=Nope=true"}); err == nil || !strings.Contains(err.Error(), "feature-gates") {
		t.Errorf("flag: %v", err)
	}
}
