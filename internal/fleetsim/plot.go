package fleetsim

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// series is one line of a panel.
type series struct {
	name  string
	color string
	y     func(Result) float64
}

// panel is one chart of the plot: figures against fleet size.
type panel struct {
	title  string
	series []series
}

// SVG draws the results as three panels against the number of nodes
// (log-log, so a straight line of slope 1 is linear growth; the dashed
// grey line is that slope through each panel's first point).
func SVG(results []Result) string {
	rs := slices.Clone(results)
	slices.SortFunc(rs, func(a, b Result) int { return a.Nodes - b.Nodes })
	panels := []panel{
		{"seconds until every node reported", []series{
			{"profile created", "#1f77b4", func(r Result) float64 { return r.Apply.Seconds() }},
			{"spec changed", "#ff7f0e", func(r Result) float64 { return r.SpecChange.Seconds() }}}},
		{"API requests per minute (steady)", []series{
			{"manager", "#d62728", func(r Result) float64 { return r.Steady.ManagerRequests }},
			{"all agents", "#2ca02c", func(r Result) float64 { return r.Steady.AgentRequests }},
			{"profile status writes", "#9467bd", func(r Result) float64 { return r.Steady.ProfileStatusWrites }}}},
		{"manager (steady)", []series{
			{"CPU, millicores", "#8c564b", func(r Result) float64 { return r.Steady.ManagerCPU / 60 * 1000 }},
			{"RSS, MiB", "#17becf", func(r Result) float64 { return float64(r.Steady.ManagerRSS) / (1 << 20) }}}},
	}
	const w, h, pad = 360, 280, 50
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", w*len(panels), h)
	for i, p := range panels {
		fmt.Fprintf(&b, `<clipPath id="p%d"><rect x="%d" y="%d" width="%d" height="%d"/></clipPath>`+"\n", i, i*w+pad, pad, w-2*pad, h-2*pad)
		drawPanel(&b, p, rs, i, w, h, pad)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func drawPanel(b *strings.Builder, p panel, rs []Result, idx, w, h, pad int) {
	x0 := float64(idx * w)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range p.series {
		for _, r := range rs {
			if v := s.y(r); v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	nlo, nhi := float64(rs[0].Nodes), float64(rs[len(rs)-1].Nodes)
	if nhi <= nlo {
		nhi = nlo * 10
	}
	pw, ph := float64(w-2*pad), float64(h-2*pad)
	px := func(n float64) float64 { return x0 + float64(pad) + pw*math.Log(n/nlo)/math.Log(nhi/nlo) }
	py := func(v float64) float64 { return float64(h-pad) - ph*math.Log(v/lo)/math.Log(hi/lo) }
	fmt.Fprintf(b, `<text x="%.0f" y="16" text-anchor="middle" font-weight="bold">%s</text>`+"\n", x0+float64(w)/2, p.title)
	fmt.Fprintf(b, `<rect x="%.0f" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", x0+float64(pad), pad, pw, ph)
	for v := lo; v <= hi*1.001; v *= 10 {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="end">%g</text>`+"\n", x0+float64(pad)-4, py(v)+4, v)
	}
	for _, r := range rs {
		fmt.Fprintf(b, `<text x="%.0f" y="%d" text-anchor="middle">%d</text>`+"\n", px(float64(r.Nodes)), h-pad+14, r.Nodes)
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%d" text-anchor="middle">nodes</text>`+"\n", x0+float64(w)/2, h-pad+28)
	for i, s := range p.series {
		var pts []string
		for _, r := range rs {
			if v := s.y(r); v > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(float64(r.Nodes)), py(v)))
			}
		}
		if len(pts) > 0 {
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), s.color)
			if v := s.y(rs[0]); v > 0 && len(rs) > 1 {
				end := v * nhi / nlo
				fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#bbb" stroke-dasharray="4 3" clip-path="url(#p%d)"/>`+"\n",
					px(nlo), py(v), px(nhi), py(end), idx)
			}
		}
		fmt.Fprintf(b, `<text x="%.0f" y="%d" fill="%s">%s</text>`+"\n", x0+float64(pad)+6, pad+14+14*i, s.color, s.name)
	}
}
