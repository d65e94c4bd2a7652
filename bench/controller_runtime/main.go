// A minimal controller-runtime manager for bench/core_throughput.py: one controller on
// ConfigMaps whose reconciler only counts, the cache restricted to one namespace, metrics
// and health probes off. It stops once it has seen -count distinct objects and prints one
// JSON line, the one the Python sides print: seconds from main() to the last object's
// first reconcile, the wall-clock time of that reconcile, and the process's peak RSS.
//
// Built by bench/core_throughput.py (go.mod.tmpl pins the controller-runtime version).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// counter is the no-op reconciler: it records each request once and calls done at the count-th.
type counter struct {
	mu    sync.Mutex
	seen  map[types.NamespacedName]struct{}
	count int
	done  func()
}

func (c *counter) Reconcile(_ context.Context, request reconcile.Request) (reconcile.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[request.NamespacedName] = struct{}{}
	if len(c.seen) == c.count {
		c.done()
	}
	return reconcile.Result{}, nil
}

// peakRSSKiB is VmHWM of /proc/self/status: this process's own peak resident set. (The
// parent's wait4 cannot tell it: Linux carries the spawning process's high-water mark across exec.)
func peakRSSKiB() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(rest, "kB")), 10, 64)
			return kib
		}
	}
	return 0
}

func main() {
	started := time.Now()
	// --kubeconfig is registered by controller-runtime's config package, as in a kubebuilder main.go.
	namespace := flag.String("namespace", "", "the only namespace the cache watches")
	count := flag.Int("count", 0, "stop after this many distinct objects were reconciled")
	workers := flag.Int("workers", 4, "MaxConcurrentReconciles")
	flag.Parse()
	ctrl.SetLogger(logr.Discard())

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "new manager:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var finished time.Time
	reconciler := &counter{
		seen:  make(map[types.NamespacedName]struct{}, *count),
		count: *count,
		done: func() {
			finished = time.Now()
			cancel()
		},
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		Named("bench").
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).
		Complete(reconciler)
	if err != nil {
		fmt.Fprintln(os.Stderr, "new controller:", err)
		os.Exit(1)
	}
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
	reconciler.mu.Lock()
	defer reconciler.mu.Unlock()
	if finished.IsZero() {
		fmt.Fprintln(os.Stderr, "manager stopped before the last reconcile")
		os.Exit(1)
	}
	line, _ := json.Marshal(map[string]any{
		"side":        "controller-runtime",
		"seconds":     finished.Sub(started).Seconds(),
		"finished_at": float64(finished.UnixNano()) / 1e9,
		"rss_kib":     peakRSSKiB(),
	})
	fmt.Println(string(line))
}
