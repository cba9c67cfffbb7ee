package printable

import "testing"

func TestString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"irqbalance", "irqbalance"},
		{"\x1b[31mirqbalance\n", `\x1b[31mirqbalance\x0a`},
		{"a\tb\rc\x7f", `a\x09b\x0dc\x7f`},
		{"kworker/0:1H", "kworker/0:1H"},
		{"naïve 名前", "naïve 名前"},
		{"\xff\xfe", `\xff\xfe`},
		{"evil\u202etxt.exe", `evil\u202etxt.exe`},
		{"c1\u009bcsi", `c1\u009bcsi`},
		{`back\slash \x1b`, `back\slash \x1b`},
	} {
		got := String(c.in)
		if got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := String(got); again != got {
			t.Errorf("String not idempotent on %q: %q", got, again)
		}
	}
}
