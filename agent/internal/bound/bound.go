// Package bound keeps what the agent writes to LatencyNode status within the
// CRD's limits: the one set of limits (a test checks them against the
// generated CRD) and the one truncation, which counts characters as the API
// server's maxLength does and never splits one, so a truncated status equals
// the server's copy and is not patched again on the next pass.
package bound

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"latencytier.io/latencytier/internal/printable"
)

// The LatencyNode status limits (maxItems, maxLength in characters).
const (
	Settings         = 256   // status.settings
	SettingValue     = 256   // settings[].setting, desired, actual
	SettingMessage   = 512   // settings[].message
	SettingOwner     = 128   // settings[].owner
	Findings         = 32    // status.findings
	FindingMessage   = 1024  // findings[].message
	Throttling       = 32    // status.throttling
	ConditionMessage = 32768 // conditions[].message (metav1.Condition)
	Version          = 128   // kernel.version
	OnlineCPUs       = 256   // kernel.onlineCPUs
	SMTGroups        = 256   // kernel.smtSiblings
	SMTGroup         = 64    // kernel.smtSiblings[]
	CmdlineFlags     = 8     // kernel.cmdlineIsolation
	CmdlineFlag      = 256   // kernel.cmdlineIsolation[]
	SchedExtOps      = 128   // kernel.schedExt.ops
	SchedExtNote     = 256   // kernel.schedExt.note
	SchedClass       = 160   // summary.class, baseline/current.schedulerClass
	SchedClassChange = 256   // baseline/current.schedulerClassChange
)

// Marker ends a truncated string.
const Marker = "..."

// String returns s cut to at most n characters, ending in Marker when cut.
// Bytes that are not UTF-8 become U+FFFD first, as JSON encoding would turn
// them, so the result survives a round trip through the API server as is.
// Control and invisible formatting characters are escaped (\xNN, \uNNNN;
// see printable.String): every string in status passes here, and much of
// it quotes what tenants control (thread names, cgroup names), which must
// not reach a terminal as escape sequences or forged lines.
func String(s string, n int) string {
	s = printable.String(validUTF8(s))
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	keep := n - len(Marker)
	if keep < 0 {
		keep, n = n, 0
	}
	cut := 0
	for i := range s {
		if keep == 0 {
			cut = i
			break
		}
		keep--
	}
	if n == 0 {
		return s[:cut]
	}
	return s[:cut] + Marker
}

// Strings bounds a list: each item to itemLen characters, and the list to
// maxItems, the last kept item then saying how many were left out.
func Strings(ss []string, maxItems, itemLen int) []string {
	if len(ss) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(ss), maxItems))
	for i, s := range ss {
		if i == maxItems-1 && len(ss) > maxItems {
			out = append(out, String(fmt.Sprintf("%s %d more", Marker, len(ss)-i), itemLen))
			break
		}
		out = append(out, String(s, itemLen))
	}
	return out
}

// validUTF8 replaces every byte that is not part of a UTF-8 sequence with
// U+FFFD, one per byte, the way encoding/json writes such a string.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
