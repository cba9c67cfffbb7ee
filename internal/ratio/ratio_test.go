package ratio

import "testing"

func TestFormatParse(t *testing.T) {
	for _, c := range []struct {
		in            float64
		format, short string
	}{
		{0, "0.0000", "0"},
		{0.0123, "0.0123", "0.01"},
		{0.22, "0.2200", "0.22"},
		{4.6, "4.6000", "4.6"},
		{1, "1.0000", "1"},
	} {
		if got := Format(c.in); got != c.format {
			t.Errorf("Format(%v) = %q, want %q", c.in, got, c.format)
		}
		if got := Short(c.in); got != c.short {
			t.Errorf("Short(%v) = %q, want %q", c.in, got, c.short)
		}
		if got, ok := Parse(Format(c.in)); !ok || got != c.in {
			t.Errorf("Parse(Format(%v)) = %v, %v", c.in, got, ok)
		}
	}
	for _, bad := range []string{"", "NaN", "nan", "x", "0.1.2"} {
		if f, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) = %v, true; want false", bad, f)
		}
	}
}
