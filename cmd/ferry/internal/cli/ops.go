package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/group"
)

// registerMetrics adds the per-stream metrics read at scrape time: owned
// partitions, ledger duplicates, lease renewal failures, DLQ size,
// tombstones purged.
func (d *daemon) registerMetrics() {
	for _, st := range d.streams {
		labels := prometheus.Labels{"stream": st.name}
		if g := st.group; g != nil {
			d.reg.MustRegister(
				prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ferry_partitions_owned",
					Help: "Partitions of the stream this member runs.", ConstLabels: labels},
					func() float64 { return float64(len(g.Owned())) }),
				prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ferry_ledger_duplicates_total",
					Help: "Events the ledger recognised as already applied (replays absorbed).", ConstLabels: labels},
					func() float64 { return float64(g.LedgerDuplicates()) }),
				prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ferry_lease_renew_failures_total",
					Help: "Failed partition lease renewals.", ConstLabels: labels},
					func() float64 { return float64(g.LeaseRenewFailures()) }),
			)
		}
		if db := st.dlq; db != nil {
			dlq, name := db.Collection("dlq"), st.name
			d.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ferry_dlq_size",
				Help: "Events in the dead-letter store (read at scrape time).", ConstLabels: labels},
				func() float64 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					n, err := dlq.CountDocuments(ctx, bson.D{{Key: "stream", Value: name}})
					if err != nil {
						return -1
					}
					return float64(n)
				}))
		}
		d.m.StreamState(st.name, string(st.status().State))
	}
	for _, v := range d.verifiers {
		labels := prometheus.Labels{"stream": v.st.Name}
		d.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ferry_verify_missing",
				Help: "Changes the last periodic verify found missing (plus projection documents missing, extra or stale); -1 before the first run.", ConstLabels: labels},
				func() float64 { return float64(v.missing.Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ferry_verify_last_run_timestamp",
				Help: "Unix time of the last completed periodic verify (0: none yet).", ConstLabels: labels},
				func() float64 { return float64(v.lastRun.Load()) }),
		)
	}
	for _, p := range d.purgers {
		d.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ferry_tombstones_purged_total",
			Help: "Tombstones of the mongodb sink's projection purged by this member.", ConstLabels: prometheus.Labels{"stream": p.stream}},
			func() float64 { return float64(p.purged.Load()) }))
	}
}

// opsServer is the ops port: /metrics, /healthz, /readyz, /status and
// the status page at /.
type opsServer struct {
	srv  *http.Server
	done chan struct{} // closed when Serve returned

	mu    sync.Mutex
	ready bool // the streams were started and are not being stopped
}

// serveOps listens on the ops port (listen:, or $PORT when set) and serves
// in the background until shutdown.
func (d *daemon) serveOps() (*opsServer, error) {
	ops := &opsServer{done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{}))
	// /healthz is about this process alone (liveness): it answers 200
	// while the process serves, whatever MongoDB, a sink or a stream does.
	// Restarting the process fixes none of those, and one stream's source
	// (bad credentials, an unreachable cluster) must not get every stream
	// restarted: /readyz, /status and ferry status say what is wrong.
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, why := d.readiness(ops.isReady())
		if !ok {
			http.Error(w, "not ready:\n"+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
		if why != "" {
			fmt.Fprintln(w, why)
		}
	})
	if err := d.serveStatus(mux); err != nil {
		return nil, err
	}
	addr := d.cfg.Listen
	if port := os.Getenv("PORT"); port != "" {
		addr = ":" + port
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ops.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(ops.done)
		_ = ops.srv.Serve(ln)
	}()
	d.log.Info("listening", "addr", ln.Addr().String())
	return ops, nil
}

func (o *opsServer) setReady(v bool) {
	o.mu.Lock()
	o.ready = v
	o.mu.Unlock()
}

func (o *opsServer) isReady() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ready
}

// shutdown stops serving (in-flight requests get a second) and waits for
// the server's goroutine.
func (o *opsServer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = o.srv.Shutdown(ctx)
	<-o.done
}

// readiness is /readyz: ready unless the daemon is starting or stopping,
// or a stream is starting or failed. A stream waiting for its sink is
// ready: restarting ferry does not fix a receiver. Neither is a stream
// running over a corrupt record of its group's state (the members repair
// or ignore it): ready, and the text names the record.
func (d *daemon) readiness(started bool) (bool, string) {
	if !started {
		return false, "starting"
	}
	var problems, notes []string
	for _, st := range d.streams {
		for _, c := range st.status().Corrupt {
			notes = append(notes, "stream "+st.name+": degraded: "+c)
		}
	}
	for _, st := range d.streams {
		s := st.status()
		switch s.State {
		case group.Failed:
			problems = append(problems, fmt.Sprintf("stream %s: failed since %s (%s): %s\n  what to do: %s\n  re-check: %s",
				st.name, s.FailedSince.UTC().Format(time.RFC3339), s.Failure.Class, s.Failure.Detail, advice(d.cfgPath, st.cfg, *s.Failure), recheckText(s)))
		case group.Starting:
			line := "stream " + st.name + ": starting"
			if s.Failure != nil {
				line += fmt.Sprintf(" (re-checking after a failure: %s)", s.Failure.Class)
			}
			if s.LastError != "" {
				line += ": " + s.LastError
			}
			problems = append(problems, line)
		case group.Draining, group.Stopped:
			problems = append(problems, "stream "+st.name+": "+string(s.State))
		}
	}
	if len(problems) == 0 {
		return true, strings.Join(notes, "\n")
	}
	return false, strings.Join(append(problems, notes...), "\n")
}
