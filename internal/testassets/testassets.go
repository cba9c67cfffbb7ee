// Package testassets locates the envtest binaries (etcd, kube-apiserver,
// kubectl) that hack/k8s-binaries.sh builds into the cache outside the repo.
package testassets

import (
	"os"
	"path/filepath"
	"testing"
)

// Version is the Kubernetes version hack/k8s-binaries.sh pins.
const Version = "v1.37.2"

// Default is $KUBEBUILDER_ASSETS, else the cache directory the binaries
// are built into.
func Default() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "latencytier", "k8s", Version)
}

// Dir is Default, failing tb when no kube-apiserver is there.
func Dir(tb testing.TB) string {
	tb.Helper()
	dir := Default()
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		tb.Fatalf("no envtest binaries in %s: run make envtest", dir)
	}
	return dir
}
