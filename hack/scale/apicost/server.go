// Package apicost measures what LatencyNode writes cost the real
// kube-apiserver: it starts etcd and kube-apiserver (the envtest binaries)
// with CRD variants, creates objects, patches them as an agent or the
// manager does, and reads the API server process's own CPU time from
// /proc, beside a ConfigMap of the same size as the reference (the machine
// is shared: only the ratio to the reference, taken in the same round, is
// comparable between runs).
package apicost

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Server is a running etcd + kube-apiserver with the CRDs installed.
type Server struct {
	env *envtest.Environment
	// Client reads and writes unstructured objects.
	Client client.Client
	pid    int
}

// Start starts the API server from assets with every CRD in crds
// (unstructured CustomResourceDefinitions, installed and waited for).
func Start(assets string, crds []*unstructured.Unstructured) (*Server, error) {
	dir, err := os.MkdirTemp("", "apicost-crds-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	for i, c := range crds {
		b, err := json.Marshal(c.Object)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%02d.json", i)), b, 0o644); err != nil {
			return nil, err
		}
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{dir}, ErrorIfCRDPathMissing: true, BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest from %s: %w", assets, err)
	}
	s := &Server{env: env}
	if s.pid, err = childPID("kube-apiserver"); err == nil {
		cfg = rest.CopyConfig(cfg)
		cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling: the server is measured
		s.Client, err = client.New(cfg, client.Options{})
	}
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return s, nil
}

// Stop stops the API server and etcd.
func (s *Server) Stop() error { return s.env.Stop() }

// CPU is the API server process's user + system CPU time so far.
func (s *Server) CPU() (time.Duration, error) { return processCPU(s.pid) }

// clockTick is USER_HZ, 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// childPID finds this process's child whose command is comm.
func childPID(comm string) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := statFields(pid)
		if err != nil || len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == os.Getpid() && commOf(pid) == comm {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no child process %q of pid %d", comm, os.Getpid())
}

func commOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// statFields returns /proc/<pid>/stat from field 3 (state) on: the command
// in parentheses may hold spaces, so fields start after its last ')'.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// processCPU is utime + stime (fields 14 and 15) of pid.
func processCPU(pid int) (time.Duration, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * clockTick, nil
}

// ObjectBytes is the JSON size of one stored object as a client reads it,
// and the part of it that is metadata.managedFields.
func (s *Server) ObjectBytes(ctx context.Context, u *unstructured.Unstructured) (total, managed int, err error) {
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(u.GroupVersionKind())
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
		return 0, 0, err
	}
	b, err := json.Marshal(got.Object)
	if err != nil {
		return 0, 0, err
	}
	mf, _ := json.Marshal(got.GetManagedFields())
	return len(b), len(mf), nil
}
