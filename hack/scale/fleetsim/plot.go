package fleetsim

import (
	"fmt"
	"math"
	"strings"
)

// bar is one figure of a run in a panel.
type bar struct {
	name  string
	color string
	y     func(Result) float64
}

// panel is one chart of the plot: a group of bars per run.
type panel struct {
	title string
	bars  []bar
}

// SVG draws the completed runs, in run order, as grouped bars in four
// panels (a linear scale from zero each), one group per run labelled with
// its size and reporting, so old and new reporting at one size stand side
// by side.
func SVG(results []Result) string {
	var rs []Result
	for _, r := range results {
		if r.Incomplete == "" {
			rs = append(rs, r)
		}
	}
	panels := []panel{
		{"seconds until every node reported", []bar{
			{"profile created", "#1f77b4", func(r Result) float64 { return r.Apply.Seconds() }},
			{"spec changed", "#ff7f0e", func(r Result) float64 { return r.SpecChange.Seconds() }}}},
		{"API server CPU, cores (steady)", []bar{
			{"API server", "#d62728", func(r Result) float64 { return r.Steady.APIServerCPU }}}},
		{"agent status writes per node per hour", []bar{
			{"status writes", "#2ca02c", func(r Result) float64 { return r.Steady.StatusWritesPerNodeHour() }}}},
		{"manager (steady)", []bar{
			{"CPU, millicores", "#8c564b", func(r Result) float64 { return r.Steady.ManagerCPU / 60 * 1000 }},
			{"RSS, MiB", "#17becf", func(r Result) float64 { return float64(r.Steady.ManagerRSS) / (1 << 20) }}}},
	}
	const w, h, pad = 340, 300, 50
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", w*len(panels), h)
	for i, p := range panels {
		drawPanel(&b, p, rs, i, w, h, pad)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func drawPanel(b *strings.Builder, p panel, rs []Result, idx, w, h, pad int) {
	x0 := float64(idx * w)
	hi := 0.0
	for _, s := range p.bars {
		for _, r := range rs {
			hi = math.Max(hi, s.y(r))
		}
	}
	hi = niceCeil(hi)
	pw, ph := float64(w-2*pad), float64(h-2*pad-20)
	py := func(v float64) float64 { return float64(h-pad-20) - ph*v/hi }
	fmt.Fprintf(b, `<text x="%.0f" y="16" text-anchor="middle" font-weight="bold">%s</text>`+"\n", x0+float64(w)/2, p.title)
	fmt.Fprintf(b, `<rect x="%.0f" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", x0+float64(pad), pad, pw, ph)
	for i := 0; i <= 4; i++ {
		v := hi * float64(i) / 4
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="end">%g</text>`+"\n", x0+float64(pad)-4, py(v)+4, math.Round(v*100)/100)
	}
	if len(rs) == 0 {
		return
	}
	group := pw / float64(len(rs))
	bw := group * 0.7 / float64(len(p.bars))
	for g, r := range rs {
		gx := x0 + float64(pad) + group*float64(g) + group*0.15
		for i, s := range p.bars {
			v := s.y(r)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %.3g</title></rect>`+"\n",
				gx+bw*float64(i), py(v), bw, float64(h-pad-20)-py(v), s.color, s.name, v)
		}
		label := "old"
		if !r.Old {
			label = "new"
		}
		fmt.Fprintf(b, `<text x="%.0f" y="%d" text-anchor="middle">%d, %s</text>`+"\n", gx+group*0.35, h-pad-6, r.Nodes, label)
	}
	for i, s := range p.bars {
		fmt.Fprintf(b, `<text x="%.0f" y="%d" fill="%s">%s</text>`+"\n", x0+float64(pad)+6, pad+14+14*i, s.color, s.name)
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for v <= 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*e {
			return m * e
		}
	}
	return 10 * e
}
