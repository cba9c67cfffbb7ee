// Package printable makes strings from untrusted sources safe to put in
// status and to print on a terminal: tenant process names (comm), cgroup
// names a tenant chose, anything an agent wrote into a LatencyNode. A name
// like "\x1b[31mirqbalance\n" must not colour or forge lines of `kubectl
// latency` output, a log or a status message.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every control character (C0 including tab and
// newline, DEL, C1) and every byte that is not UTF-8 written as \xNN, and
// every invisible formatting rune (bidi overrides, zero-width characters)
// as \uNNNN. Everything else, backslashes included, is kept, so String is
// idempotent: text escaped by the agent prints unchanged through the
// plugin. (A name that spells "\x1b" literally therefore reads the same as
// an escaped ESC; it can no longer act as one.)
func String(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}
