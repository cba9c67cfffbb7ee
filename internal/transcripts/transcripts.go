// Package transcripts keeps the command outputs the README and docs/ show
// equal to the ones a real run printed. hack/e2e.sh writes each output it
// shows into docs/transcripts/NAME.txt; a document shows it after a marker
//
//	<!-- transcript docs/transcripts/NAME.txt node=vm kernel=6.18.44 -->
//
// followed by a fenced block. Two outputs are the same when they differ only
// in what changes from run to run: measured figures, counts, ages and times,
// revision hashes, pod UIDs and container IDs, the names the file's header
// records (the node, its kernel), and what the machine's load decides rather
// than the code: which passing verdict a node got (Improved, Unchanged,
// Inconclusive, Improved|Unchanged, and Passed from older runs), which
// findings fired, which pods waited and how their wait split between
// offenders, and which figure a regression was judged on. Commands, column
// headers, states, condition reasons and message wording must match, so a
// column change or a reworded message makes the copy stale.
package transcripts

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// File is one transcript as hack/e2e.sh wrote it: a header line
// "# hack/e2e.sh TIME node=NAME kernel=VERSION", then "$ COMMAND" and
// the command's output.
type File struct {
	Names map[string]string // "node" → "vm", "kernel" → "6.18.44-fc-v857"
	Body  string            // from the "$ COMMAND" line on
}

// Parse reads a transcript file.
func Parse(text string) (File, error) {
	header, body, ok := strings.Cut(text, "\n")
	if !ok || !strings.HasPrefix(header, "# ") || !strings.HasPrefix(body, "$ ") {
		return File{}, fmt.Errorf("want a '# ...' header line, then '$ COMMAND' and the output")
	}
	return File{Names: ParseNames(header), Body: strings.TrimRight(body, "\n") + "\n"}, nil
}

// ParseNames collects the key=value words of a header or marker line.
func ParseNames(line string) map[string]string {
	names := map[string]string{}
	for _, w := range strings.Fields(line) {
		if k, v, ok := strings.Cut(w, "="); ok && k != "" && v != "" {
			names[k] = v
		}
	}
	return names
}

// NamesString prints names as the key=value words of a marker, sorted.
func NamesString(names map[string]string) string {
	var words []string
	for k, v := range names {
		words = append(words, k+"="+v)
	}
	sort.Strings(words)
	return strings.Join(words, " ")
}

var (
	timeRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z`)
	uidRE  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	idRE   = regexp.MustCompile(`\b[0-9a-f]{12,64}\b`)
	hashRE = regexp.MustCompile(`-[0-9a-f]{6,10}\b`)
	// What the load decides (see the package comment).
	passRE    = regexp.MustCompile(`\b(Improved\|Unchanged|Improved|Unchanged|Inconclusive|Passed)\b`)
	findingRE = regexp.MustCompile(`^\s+(Critical|Warning|Info)\s+[A-Z][A-Za-z]+:`)
	sharesRE  = regexp.MustCompile(`(waited \S+ per second):.*$`)
	// kubectl latency explain's heading over the waited lines.
	waitsHeader = "who made the measured pods wait:"
	reasonRE    = regexp.MustCompile(`([Rr]egressed: ).*?(;|\(revision|$)`)
	numberRE    = regexp.MustCompile(`(^|[^A-Za-z0-9_])([0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?(ns|µs|us|ms|s|m|h|d)?)+(%|×|x)?`)
	headerRE    = regexp.MustCompile(`^[A-Z][A-Z0-9.-]*$`)
)

// Normalize prints text with every run-dependent part replaced: a name in
// names by <key>, times by <time>, revision hashes by -<hash>, figures
// (numbers with their units, ages) by #. Table rows (aligned under a header
// of capitalised column names, as kubectl prints them) are split into their
// cells, and an empty cell, "-" and "<none>" all read #; other lines have
// their spacing collapsed.
func Normalize(text string, names map[string]string) string {
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	// Longest value first, so a name containing another is replaced whole.
	sort.Slice(keys, func(i, j int) bool { return len(names[keys[i]]) > len(names[keys[j]]) })
	var out []string
	var columns []int // start of each column of the current table, nil outside one
	named := func(s string) string {
		for _, k := range keys {
			s = regexp.MustCompile(`\b`+regexp.QuoteMeta(names[k])+`\b`).ReplaceAllString(s, "<"+k+">")
		}
		return s
	}
	for _, raw := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		line := named(raw)
		// Findings: their list, or "none", is one item.
		if findingRE.MatchString(line) || (strings.TrimSpace(line) == "none" && len(out) > 0 && out[len(out)-1] == "Findings:") {
			if len(out) == 0 || out[len(out)-1] != "<findings>" {
				out = append(out, "<findings>")
			}
			continue
		}
		// Who made the measured pods wait: which pods waited in the
		// window (and so how many lines) is the load's, like findings.
		if sharesRE.MatchString(line) || strings.TrimSpace(line) == waitsHeader {
			if len(out) == 0 || out[len(out)-1] != "<who waited>" {
				out = append(out, "<who waited>")
			}
			continue
		}
		line = reasonRE.ReplaceAllString(line, "${1}<reason>${2}")
		line = passRE.ReplaceAllString(line, "<passed>")
		if strings.TrimSpace(line) == "" {
			columns = nil
			out = append(out, "")
			continue
		}
		if c := headerColumns(line); c != nil {
			columns = c
			out = append(out, "| "+strings.Join(strings.Fields(line), " | "))
			continue
		}
		// A table row is cut where kubectl aligned it, before names are
		// replaced: a name replaced by a key of another length would move
		// the later cells off their columns, and empty cells would vanish.
		if cells, ok := split(raw, columns); ok {
			for i, c := range cells {
				c = sharesRE.ReplaceAllString(named(c), "${1}: <shares>")
				c = reasonRE.ReplaceAllString(c, "${1}<reason>${2}")
				cells[i] = figures(passRE.ReplaceAllString(c, "<passed>"))
			}
			out = append(out, "| "+strings.Join(cells, " | "))
			continue
		}
		out = append(out, figures(line))
	}
	return strings.Join(out, "\n") + "\n"
}

// figures normalizes one line or cell: times, hashes, figures, spacing.
func figures(s string) string {
	s = timeRE.ReplaceAllString(s, "<time>")
	s = uidRE.ReplaceAllString(s, "<uid>")
	s = idRE.ReplaceAllString(s, "<id>")
	s = hashRE.ReplaceAllString(s, "-<hash>")
	s = numberRE.ReplaceAllString(s, "${1}#")
	f := strings.Fields(s)
	for i, w := range f {
		if w == "-" || w == "<none>" {
			f[i] = "#"
		}
	}
	if len(f) == 0 {
		return "#"
	}
	return strings.Join(f, " ")
}

// headerColumns returns the start of each column when line is a table
// header: at least two capitalised column names, separated by two or more
// spaces, as kubectl's tab writer prints them.
func headerColumns(line string) []int {
	f := strings.Fields(line)
	if len(f) < 2 {
		return nil
	}
	for _, w := range f {
		if !headerRE.MatchString(w) {
			return nil
		}
	}
	var starts []int
	for i := 0; i < len(line); i++ {
		if line[i] != ' ' && (i == 0 || line[i-1] == ' ') {
			if len(starts) > 0 && !strings.HasSuffix(line[:i], "  ") {
				return nil // one space only: a sentence in capitals, not columns
			}
			starts = append(starts, i)
		}
	}
	return starts
}

// split cuts a table row into its cells, when the row is aligned under the
// header: nothing before the first column, and a space before every column
// start the row reaches.
func split(line string, columns []int) ([]string, bool) {
	if columns == nil || strings.TrimSpace(line[:min(len(line), columns[0])]) != "" {
		return nil, false
	}
	cells := make([]string, len(columns))
	for i, start := range columns {
		if start >= len(line) {
			break
		}
		if i > 0 && line[start-1] != ' ' {
			return nil, false
		}
		end := len(line)
		if i+1 < len(columns) && columns[i+1] < end {
			end = columns[i+1]
		}
		cells[i] = line[start:end]
	}
	return cells, true
}

// Block is one marked copy of a transcript in a document.
type Block struct {
	Path       string            // the transcript it copies, docs/transcripts/NAME.txt
	Names      map[string]string // the names the copy shows (its marker's key=value words)
	Body       string            // the fenced block's content
	Start, End int               // byte range of marker line through closing fence, in the document
}

const markerPrefix = "<!-- transcript "

// Blocks finds every marked transcript block in a document: a marker is a
// line of its own, starting with "<!-- transcript ".
func Blocks(doc string) ([]Block, error) {
	var blocks []Block
	for off := 0; ; {
		i := strings.Index(doc[off:], "\n"+markerPrefix)
		if off == 0 && strings.HasPrefix(doc, markerPrefix) {
			i = -1 // a marker on the first line
		} else if i < 0 {
			return blocks, nil
		}
		start := off + i + 1
		eol := strings.Index(doc[start:], "\n")
		if eol < 0 {
			return nil, fmt.Errorf("marker at byte %d: no line end", start)
		}
		marker := strings.TrimSuffix(strings.TrimPrefix(doc[start:start+eol], markerPrefix), "-->")
		fields := strings.Fields(marker)
		if len(fields) == 0 {
			return nil, fmt.Errorf("marker at byte %d names no transcript", start)
		}
		rest := doc[start+eol+1:]
		fence, _, _ := strings.Cut(rest, "\n")
		if !strings.HasPrefix(fence, "```") {
			return nil, fmt.Errorf("transcript marker %s: the next line must open a fenced block, not %q", fields[0], fence)
		}
		bodyStart := start + eol + 1 + len(fence) + 1
		j := strings.Index(doc[bodyStart:], "```")
		if j < 0 {
			return nil, fmt.Errorf("transcript marker %s: unclosed block", fields[0])
		}
		end := bodyStart + j + 3
		blocks = append(blocks, Block{
			Path:  fields[0],
			Names: ParseNames(strings.Join(fields[1:], " ")),
			Body:  doc[bodyStart : bodyStart+j],
			Start: start,
			End:   end,
		})
		off = end
	}
}

// Render prints the marked block that shows f, copied from path.
func Render(path string, f File) string {
	return markerPrefix + path + " " + NamesString(f.Names) + " -->\n```text\n" + f.Body + "```"
}
