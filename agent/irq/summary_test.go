package irq

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSummaryID(t *testing.T) {
	var alternate []int
	for n := 24; n < 24+2*256; n += 2 {
		alternate = append(alternate, n)
	}
	cases := []struct {
		name string
		ns   []int
		want string
	}{
		{"one IRQ keeps its ID", []int{36}, "irq/36"},
		{"ranges and singles, any order", []int{42, 24, 25, 26, 27, 28, 29, 30, 31, 40}, "irq/24-31,40,42"},
		{"two neighbours", []int{24, 25}, "irq/24-25"},
		{"cut at a comma with the rest counted", alternate, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := SummaryID(c.ns, 256)
			if utf8.RuneCountInString(got) > 256 {
				t.Fatalf("%d characters: %s", utf8.RuneCountInString(got), got)
			}
			if c.want != "" && got != c.want {
				t.Fatalf("SummaryID = %q, want %q", got, c.want)
			}
			listed, ok := SummaryNumbers(got)
			if !ok {
				t.Fatalf("SummaryNumbers(%q) refused its own ID", got)
			}
			rest := 0
			if i := strings.Index(got, "…+"); i >= 0 {
				if _, err := fmt.Sscanf(got[i+len("…+"):], "%d", &rest); err != nil {
					t.Fatal(err)
				}
			} else if c.want == "" {
				t.Fatalf("%q not cut", got)
			}
			if len(listed)+rest != len(c.ns) {
				t.Errorf("%q lists %d and counts %d more; want %d in all", got, len(listed), rest, len(c.ns))
			}
		})
	}
}

func TestNumber(t *testing.T) {
	for id, want := range map[string]int{"irq/24": 24, "irq/0": 0, "irq/default_smp_affinity": -1, "irq/24-25": -1,
		"irq/": -1, "sysctl/irq": -1, "irq/+1": -1} {
		n, ok := Number(id)
		if (want >= 0) != ok || (ok && n != want) {
			t.Errorf("Number(%q) = %d, %v", id, n, ok)
		}
	}
	if ID(7) != "irq/7" {
		t.Fatal("ID changed shape: Number and SummaryID follow it")
	}
}
