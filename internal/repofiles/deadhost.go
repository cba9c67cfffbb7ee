package repofiles

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// deadHostURL matches a URL on latencytier.io or one of its subdomains.
// The name is the project's API group and import path, but no host serves
// it: the alerts' runbooks, the chart's home and sources and the krew
// manifest once pointed there. A URL of the project is a path in the
// repository, or a value the installer sets (docs/metrics.md, krew/dist.sh).
var deadHostURL = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://([a-z0-9-]+\.)*latencytier\.io\b`)

// DeadHostURLs returns one problem per line of a tracked text file at root
// that names a URL on the dead host.
func DeadHostURLs(root string) ([]string, error) {
	files, err := Tracked(root)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue // binary
		}
		for i, line := range bytes.Split(b, []byte("\n")) {
			if m := deadHostURL.Find(line); m != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: %s is on a host that serves nothing (use the path in the repository, or a value the installer sets)", f, i+1, m))
			}
		}
	}
	return problems, nil
}
