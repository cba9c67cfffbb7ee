package fleetsim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// profileAPIServer writes the API server's CPU profile over the next d
// (its own /debug/pprof, which kube-apiserver serves to system:masters) to
// path, in the background; the returned func waits for it. An empty path
// profiles nothing.
func (f *fleet) profileAPIServer(ctx context.Context, path string, d time.Duration) func() {
	if path == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fetchProfile(ctx, f.api.adminCfg, path, d); err != nil {
			f.logf("API server CPU profile %s: %v", path, err)
			return
		}
		f.logf("API server CPU profile over %s written to %s", d, path)
	}()
	return func() { <-done }
}

func fetchProfile(ctx context.Context, cfg *rest.Config, path string, d time.Duration) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(cfg.Host, "/"), int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
