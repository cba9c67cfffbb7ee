// Package grafana holds the Grafana dashboard of latencytier
// (config/grafana/latencytier.json, shipped by the chart behind
// monitoring.dashboard.enabled) and what checks it: the PromQL of every
// panel and template variable, expanded as Grafana would with every
// variable at "All", and a check that each query returns data from a real
// Prometheus (config/grafana/check, which the e2e runs).
package grafana

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Dashboard is the part of a Grafana dashboard's JSON model the checks read.
type Dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel; rows hold their collapsed panels in Panels.
type Panel struct {
	ID      int      `json:"id"`
	Type    string   `json:"type"`
	Title   string   `json:"title"`
	Targets []Target `json:"targets"`
	Panels  []Panel  `json:"panels"`
}

// Target is one query of a panel.
type Target struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
}

// Variable is a template variable (type query: label_values(...)).
type Variable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Definition string `json:"definition"`
	AllValue   string `json:"allValue"`
}

// Query is one PromQL expression of the dashboard and where it is.
type Query struct {
	Where string // "panel 3 \"Rollout verdicts\" A", "variable node"
	Expr  string // as written in the dashboard
}

// Load reads a dashboard; unknown fields are fine (Grafana's model is
// large), invalid JSON is not.
func Load(path string) (*Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// AllPanels lists the panels, those inside rows included, rows excluded.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

var labelValues = regexp.MustCompile(`^label_values\(\s*(.+?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// Queries lists every panel target's expression and, for every query
// variable, the expression Grafana's label_values(METRIC, LABEL) runs
// (count by (LABEL) (METRIC)). A variable that is not label_values is an
// error: nothing here could check it.
func (d *Dashboard) Queries() ([]Query, error) {
	var out []Query
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			return nil, fmt.Errorf("variable %s: definition %q is not label_values(METRIC, LABEL)", v.Name, v.Definition)
		}
		out = append(out, Query{Where: "variable " + v.Name, Expr: fmt.Sprintf("count by (%s) (%s)", m[2], m[1])})
	}
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			out = append(out, Query{Where: fmt.Sprintf("panel %d %q %s", p.ID, p.Title, t.RefID), Expr: t.Expr})
		}
	}
	return out, nil
}

var variableRef = regexp.MustCompile(`\$(?:\{([a-zA-Z_][a-zA-Z0-9_]*)\}|([a-zA-Z_][a-zA-Z0-9_]*))`)

// Expander turns a dashboard expression into plain PromQL: each template
// variable becomes its "All" value, Grafana's interval variables the given
// durations.
type Expander struct {
	Values map[string]string
}

// NewExpander gives the dashboard's variables their All values (allValue,
// else ".*", what Grafana sends for All without one) and the built-in
// intervals rateInterval ($__rate_interval, $__interval) and rng
// ($__range).
func (d *Dashboard) NewExpander(rateInterval, rng string) Expander {
	vals := map[string]string{"__rate_interval": rateInterval, "__interval": rateInterval, "__range": rng}
	for _, v := range d.Templating.List {
		if v.Type == "datasource" {
			continue
		}
		vals[v.Name] = v.AllValue
		if v.AllValue == "" {
			vals[v.Name] = ".*"
		}
	}
	return Expander{Values: vals}
}

// Expand substitutes every variable in expr; one the dashboard does not
// define is an error naming it.
func (e Expander) Expand(expr string) (string, error) {
	var unknown []string
	out := variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1] + m[2]
		v, ok := e.Values[name]
		if !ok {
			unknown = append(unknown, "$"+name)
			return ref
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("undefined variable(s) %s in %q", strings.Join(unknown, ", "), expr)
	}
	return out, nil
}

var identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

// MetricNames lists the names in expr that are ours (they contain
// "latencytier_"), plus "up", sorted and without duplicates. Label values
// are quoted and never contain the prefix in this dashboard, so a plain
// scan suffices.
func MetricNames(expr string) []string {
	seen := map[string]bool{}
	for _, id := range identifier.FindAllString(stripQuoted(expr), -1) {
		if strings.Contains(id, "latencytier_") || id == "up" {
			seen[id] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")

func stripQuoted(expr string) string { return quoted.ReplaceAllString(expr, `""`) }

// Result is what a Prometheus returned for one query over the window.
type Result struct {
	Query   Query
	PromQL  string // expanded
	Series  int    // series with at least one sample
	Samples int
	Err     error
}

// Checker runs expanded queries against a Prometheus as Grafana does: a
// range query over the last Window, one point per Step.
type Checker struct {
	URL    string // http://127.0.0.1:9090
	Window time.Duration
	Step   time.Duration
	Client *http.Client
}

// Run runs one query; an HTTP, API or PromQL error is in Result.Err.
func (c Checker) Run(ctx context.Context, q Query, promql string) Result {
	r := Result{Query: q, PromQL: promql}
	end := time.Now()
	form := url.Values{
		"query": {promql},
		"start": {strconv.FormatInt(end.Add(-c.Window).Unix(), 10)},
		"end":   {strconv.FormatInt(end.Unix(), 10)},
		"step":  {strconv.FormatFloat(c.Step.Seconds(), 'f', -1, 64)},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.URL, "/")+"/api/v1/query_range",
		strings.NewReader(form.Encode()))
	if err != nil {
		r.Err = err
		return r
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	hc := c.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		r.Err = err
		return r
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Values [][2]any `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		r.Err = fmt.Errorf("HTTP %s: %w", resp.Status, err)
		return r
	}
	if body.Status != "success" {
		r.Err = errors.New(body.Error)
		return r
	}
	for _, s := range body.Data.Result {
		if len(s.Values) > 0 {
			r.Series++
			r.Samples += len(s.Values)
		}
	}
	return r
}

// OK says the query ran and returned data.
func (r Result) OK() bool { return r.Err == nil && r.Series > 0 }

func (r Result) String() string {
	switch {
	case r.Err != nil:
		return fmt.Sprintf("ERROR %s: %v\n    %s", r.Query.Where, r.Err, r.PromQL)
	case r.Series == 0:
		return fmt.Sprintf("EMPTY %s: no series\n    %s", r.Query.Where, r.PromQL)
	}
	return fmt.Sprintf("ok    %s: %d series, %d samples", r.Query.Where, r.Series, r.Samples)
}

// CheckAll expands and runs every query of d and, while one returns no
// data and wait has not passed, runs them all again every two seconds
// (the data of a Prometheus that has just started comes in scrape by
// scrape); it returns the last round's results.
func (c Checker) CheckAll(ctx context.Context, d *Dashboard, e Expander, wait time.Duration) ([]Result, error) {
	qs, err := d.Queries()
	if err != nil {
		return nil, err
	}
	exprs := make([]string, len(qs))
	for i, q := range qs {
		if exprs[i], err = e.Expand(q.Expr); err != nil {
			return nil, fmt.Errorf("%s: %w", q.Where, err)
		}
	}
	until := time.Now().Add(wait)
	for {
		res := make([]Result, len(qs))
		ok := true
		for i, q := range qs {
			res[i] = c.Run(ctx, q, exprs[i])
			ok = ok && res[i].OK()
		}
		if ok || !time.Now().Before(until) || ctx.Err() != nil {
			return res, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}
