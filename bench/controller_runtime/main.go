// A minimal controller-runtime manager for bench/core_throughput.py and bench/core_scale.py:
// one controller on ConfigMaps whose reconciler reads the object from the cache and counts,
// the cache restricted to one namespace, metrics and health probes off.
//
// Without -updates it stops once it has seen -count distinct objects and prints one JSON line,
// the one the Python sides print: seconds from main() to the last object's first reconcile, the
// wall-clock time of that reconcile, and the process's peak RSS.
//
// With -updates K -phases P (bench/core_scale.py) it prints JSON lines as it goes: "synced" at
// the last first reconcile (seconds from main(), RSS before the manager started and now), then
// for each phase p = 1..P, once K distinct objects were reconciled with data.u == tag+"p": the
// wall-clock times of the first and last update events carrying it and of that last reconcile, the
// update events and distinct resourceVersions seen, and the CPU seconds the process used in
// between; then "done" with the peak RSS.
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
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// counter is the reconciler: it records each request once per phase (phase 0: the initial sync);
// with -updates it first reads the object from the cache, as a real reconciler would.
type counter struct {
	mu      sync.Mutex
	reader  client.Reader
	seen    map[types.NamespacedName]struct{}
	count   int
	updates int
	phases  int
	phase   int
	tag     string
	started time.Time
	// the current update phase's observations
	firstEvent time.Time
	lastEvent  time.Time
	events     int
	versions   map[string]struct{}
	cpuAtStart float64
	done       func()
	emit       func(map[string]any)
}

func (c *counter) Reconcile(ctx context.Context, request reconcile.Request) (reconcile.Result, error) {
	var object corev1.ConfigMap
	if c.updates > 0 {
		if err := c.reader.Get(ctx, request.NamespacedName, &object); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase > 0 && object.Data["u"] != c.marker() {
		return reconcile.Result{}, nil
	}
	c.seen[request.NamespacedName] = struct{}{}
	if c.phase == 0 && len(c.seen) == c.count {
		if c.updates == 0 {
			c.done()
			return reconcile.Result{}, nil
		}
		c.emit(map[string]any{
			"event":           "synced",
			"seconds":         time.Since(c.started).Seconds(),
			"finished_at":     unixSeconds(time.Now()),
			"rss_synced_kib":  statusKiB("VmRSS:"),
			"peak_synced_kib": statusKiB("VmHWM:"),
		})
		c.nextPhase()
	} else if c.phase > 0 && len(c.seen) == c.updates {
		now := time.Now()
		c.emit(map[string]any{
			"event":          "phase",
			"phase":          c.phase,
			"first_event_at": unixSeconds(c.firstEvent),
			"last_event_at":  unixSeconds(c.lastEvent),
			"finished_at":    unixSeconds(now),
			"events":         c.events,
			"versions":       len(c.versions),
			"objects":        len(c.seen),
			"cpu_seconds":    cpuSeconds() - c.cpuAtStart,
		})
		if c.phase == c.phases {
			c.done()
			return reconcile.Result{}, nil
		}
		c.nextPhase()
	}
	return reconcile.Result{}, nil
}

// marker is the value the current phase's updates give data.u: the run's tag and the phase.
func (c *counter) marker() string { return c.tag + strconv.Itoa(c.phase) }

func (c *counter) nextPhase() {
	c.phase++
	c.seen = make(map[types.NamespacedName]struct{}, c.updates)
	c.versions = make(map[string]struct{}, c.updates)
	c.events = 0
	c.firstEvent = time.Time{}
	c.cpuAtStart = cpuSeconds()
}

// observe is the update predicate: it counts the update events of the current phase (and lets
// every event through, as no predicate would).
func (c *counter) observe(e event.UpdateEvent) bool {
	object, ok := e.ObjectNew.(*corev1.ConfigMap)
	if !ok {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase > 0 && object.Data["u"] == c.marker() {
		c.lastEvent = time.Now()
		if c.firstEvent.IsZero() {
			c.firstEvent = c.lastEvent
		}
		c.events++
		c.versions[object.ResourceVersion] = struct{}{}
	}
	return true
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// statusKiB reads one "Vm...:" line of /proc/self/status: VmRSS (resident now) or VmHWM (this
// process's own peak; the parent's wait4 cannot tell it: Linux carries the spawning process's
// high-water mark across exec).
func statusKiB(field string) int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kib, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(rest, "kB")), 10, 64)
			return kib
		}
	}
	return 0
}

func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return float64(usage.Utime.Nano()+usage.Stime.Nano()) / 1e9
}

func main() {
	started := time.Now()
	// --kubeconfig is registered by controller-runtime's config package, as in a kubebuilder main.go.
	namespace := flag.String("namespace", "", "the only namespace the cache watches")
	count := flag.Int("count", 0, "stop after this many distinct objects were reconciled")
	workers := flag.Int("workers", 4, "MaxConcurrentReconciles")
	updates := flag.Int("updates", 0, "after the sync, objects changed per update phase (0: stop at the sync)")
	phases := flag.Int("phases", 1, "update phases, each setting data.u to -tag and its number")
	tag := flag.String("tag", "", "prefix of the phases' data.u values (unique per run)")
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
	out := json.NewEncoder(os.Stdout)
	reconciler := &counter{
		reader:  mgr.GetClient(),
		seen:    make(map[types.NamespacedName]struct{}, *count),
		count:   *count,
		updates: *updates,
		phases:  *phases,
		tag:     *tag,
		started: started,
		done: func() {
			finished = time.Now()
			cancel()
		},
		emit: func(line map[string]any) {
			line["side"] = "controller-runtime"
			_ = out.Encode(line)
		},
	}
	var options []builder.ForOption
	if *updates > 0 {
		options = append(options, builder.WithPredicates(predicate.Funcs{UpdateFunc: reconciler.observe}))
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}, options...).
		Named("bench").
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).
		Complete(reconciler)
	if err != nil {
		fmt.Fprintln(os.Stderr, "new controller:", err)
		os.Exit(1)
	}
	rssBefore := statusKiB("VmRSS:")
	if *updates > 0 {
		_ = out.Encode(map[string]any{"side": "controller-runtime", "event": "starting", "rss_before_kib": rssBefore})
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
	line := map[string]any{
		"side":        "controller-runtime",
		"seconds":     finished.Sub(started).Seconds(),
		"finished_at": unixSeconds(finished),
		"rss_kib":     statusKiB("VmHWM:"),
	}
	if *updates > 0 {
		line["event"] = "done"
	}
	_ = out.Encode(line)
}
