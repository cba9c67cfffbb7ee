package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// column is one column of a command's table: its header, its cell for a
// row, and how --sort-by orders rows by it. A column with a number (a
// duration in nanoseconds, a count, a ratio) sorts highest first, as
// kubectl top --sort-by does and as a latency table is read; any other
// sorts as text, A to Z. A row without a value ("-") sorts last either way.
type column[T any] struct {
	header string
	cell   func(T) string
	number func(T) (float64, bool) // nil: the cell sorts as text
	wide   bool                    // only under -o wide
}

// key is the name --sort-by takes for the column: its header in lower case
// ("p99", "throttled", "psi-some10").
func (c column[T]) key() string { return strings.ToLower(strings.TrimSpace(c.header)) }

// columns is a table's columns, in order.
type columns[T any] []column[T]

// headers are the headers shown (the wide ones only when wide).
func (cs columns[T]) headers(wide bool) []string {
	var h []string
	for _, c := range cs {
		if !c.wide || wide {
			h = append(h, c.header)
		}
	}
	return h
}

// cells are row's cells in the columns shown.
func (cs columns[T]) cells(row T, wide bool) []string {
	var out []string
	for _, c := range cs {
		if !c.wide || wide {
			out = append(out, c.cell(row))
		}
	}
	return out
}

// keys are the names --sort-by takes, in the table's order.
func (cs columns[T]) keys() []string {
	k := make([]string, len(cs))
	for i, c := range cs {
		k[i] = c.key()
	}
	return k
}

// validateSortBy fails on a --sort-by that names no column, listing the
// ones it may name; "" (the command's own order) is valid.
func (cs columns[T]) validateSortBy(key string) error {
	if key == "" || slices.Contains(cs.keys(), strings.ToLower(key)) {
		return nil
	}
	return fmt.Errorf("--sort-by %q: not a column; use one of %s", key, strings.Join(cs.keys(), ", "))
}

// sortBy orders rows by the column key names (validated), stably: rows
// that tie keep the command's own order. "" leaves rows as they are.
func (cs columns[T]) sortBy(rows []T, key string) {
	i := slices.IndexFunc(cs, func(c column[T]) bool { return c.key() == strings.ToLower(key) })
	if key == "" || i < 0 {
		return
	}
	c := cs[i]
	slices.SortStableFunc(rows, func(a, b T) int {
		if c.number != nil {
			na, oka := c.number(a)
			nb, okb := c.number(b)
			if oka != okb {
				return present(oka)
			}
			return cmp.Compare(nb, na) // highest first
		}
		ta, tb := c.cell(a), c.cell(b)
		if (ta == "-") != (tb == "-") {
			return present(ta != "-")
		}
		return cmp.Compare(strings.ToLower(ta), strings.ToLower(tb))
	})
}

// present orders a row with a value (first true) before one without.
func present(first bool) int {
	if first {
		return -1
	}
	return 1
}

// durNumber is a duration's nanoseconds as a sort key, none when unmeasured.
func durNumber(d *metav1.Duration) (float64, bool) {
	if d == nil {
		return 0, false
	}
	return float64(d.Duration), true
}

// ratioNumber is a ratio the API stores as a decimal string ("0.2"), none
// when empty or not a number.
func ratioNumber(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// aligned prints rows in columns as kubectl get does (two blanks between
// columns, the last not padded) and remembers the widths, so that rows
// printed later (-w) line up under the first ones; a later, longer cell
// widens its column from then on. Every cell is escaped (safe).
type aligned struct {
	out    io.Writer
	widths []int
}

// print fits the widths to rows, then writes them.
func (a *aligned) print(rows ...[]string) error {
	esc := make([][]string, len(rows))
	for i, r := range rows {
		esc[i] = make([]string, len(r))
		for j, c := range r {
			esc[i][j] = safe(c)
			if j == len(r)-1 {
				continue // the last cell is not padded, so it does not set a width
			}
			if j >= len(a.widths) {
				a.widths = append(a.widths, 0)
			}
			a.widths[j] = max(a.widths[j], utf8.RuneCountInString(esc[i][j]))
		}
	}
	var b strings.Builder
	for _, r := range esc {
		for j, c := range r {
			b.WriteString(c)
			if j < len(r)-1 {
				b.WriteString(strings.Repeat(" ", a.widths[j]-utf8.RuneCountInString(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(a.out, b.String())
	return err
}
