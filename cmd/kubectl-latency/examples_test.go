package main

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestEveryCommandHasExamples: each command's help shows Examples, and
// every example command line names that command and parses with its
// flags and argument rules (a renamed flag fails here, not in a reader's
// terminal).
func TestEveryCommandHasExamples(t *testing.T) {
	root := newRootCommand(genericiooptions.NewTestIOStreamsDiscard())
	n := 0
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		n++
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s: no Examples in its help", c.Name())
			continue
		}
		lines := 0
		for _, line := range strings.Split(c.Example, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			lines++
			words, err := splitWords(line)
			if err != nil || len(words) < 3 || words[0] != "kubectl" || words[1] != "latency" || words[2] != c.Name() {
				t.Errorf("%s: example %q is not kubectl latency %s ... (%v)", c.Name(), line, c.Name(), err)
				continue
			}
			cmd, args, err := root.Find(words[2:])
			if err != nil || cmd != c {
				t.Errorf("%s: example %q finds %v: %v", c.Name(), line, cmd.Name(), err)
				continue
			}
			if err := cmd.ParseFlags(args); err != nil {
				t.Errorf("%s: example %q: %v", c.Name(), line, err)
				continue
			}
			if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
				t.Errorf("%s: example %q: %v", c.Name(), line, err)
			}
		}
		if lines == 0 {
			t.Errorf("%s: Examples hold no command line", c.Name())
		}
	}
	if n < 5 {
		t.Errorf("%d commands, want status, explain, top, boot and version at least", n)
	}
}

// splitWords splits a shell command line on blanks, keeping a
// 'single-quoted' word whole (what the examples use).
func splitWords(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	quoted, in := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, in = !quoted, true
		case r == ' ' && !quoted:
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote in %q", line)
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

// TestHelpSaysWhyAListFlagIsMissing: a command that lists or shows
// LatencyProfiles or LatencyNodes and lacks one of kubectl get's list
// flags says, in its help, that it lacks it (and why).
func TestHelpSaysWhyAListFlagIsMissing(t *testing.T) {
	root := newRootCommand(genericiooptions.NewTestIOStreamsDiscard())
	for _, name := range []string{"status", "explain", "top", "boot"} {
		c, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		for _, flag := range []struct{ long, short string }{{"no-headers", ""}, {"selector", "-l"}, {"watch", "-w"}, {"sort-by", ""}} {
			if c.Flags().Lookup(flag.long) != nil {
				continue
			}
			if !strings.Contains(c.Long, "--"+flag.long) && (flag.short == "" || !strings.Contains(c.Long, flag.short)) {
				t.Errorf("%s has no --%s and its help does not say why:\n%s", name, flag.long, c.Long)
			}
		}
	}
}
