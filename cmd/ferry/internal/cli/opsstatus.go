package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/lease"
)

// statusTTL is how long the ops port reuses a status document: however
// many pages are open, a member reads the state store for it at most
// once per statusTTL.
const statusTTL = time.Second

// statusTimeout bounds one read of the status document.
const statusTimeout = 5 * time.Second

// printStatusJSON is `ferry status -json`: the document /status serves.
func printStatusJSON(ctx context.Context, cfgPath string, cfg *config.Config, db *mongo.Database, ls *lease.Store,
	cps *mongostore.Store, w io.Writer) error {
	src := statusSource{cfg: cfg, cfgPath: cfgPath, db: db, ls: ls, cps: cps, digest: configuredDigest(db.Client(), cps)}
	doc, err := src.build(ctx)
	if err != nil {
		return err
	}
	return writeStatusJSON(w, doc)
}

func writeStatusJSON(w io.Writer, doc *statusDoc) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// statusSource returns where the daemon reads its status document from.
func (d *daemon) statusSource() (statusSource, error) {
	src := statusSource{cfg: d.cfg, cfgPath: d.cfgPath, cps: d.cps}
	var client *mongo.Client
	for _, c := range d.clients {
		client = c
		break
	}
	if d.state != nil {
		ls, err := lease.New(d.state)
		if err != nil {
			return src, err
		}
		src.db, src.ls, client = d.state, ls, d.state.Client()
	} else {
		member := localMemberID()
		src.local = func(name string) (group.Status, string, bool) {
			for _, st := range d.streams {
				if st.name == name {
					return st.status(), member, true
				}
			}
			return group.Status{}, "", false
		}
	}
	if client != nil {
		src.digest = configuredDigest(client, d.cps)
	}
	return src, nil
}

// localMemberID names the process in the bolt state store's status (it
// has no group, so no member id): the host name.
func localMemberID() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "local"
}

// statusHandler serves /status: the status document as JSON, read at
// most once per statusTTL. A state store that cannot be read is a 503
// with the error (which names no credential: URIs are redacted).
func (d *daemon) statusHandler() (http.Handler, error) {
	src, err := d.statusSource()
	if err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		at   time.Time
		body []byte
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read only: /status answers GET", http.StatusMethodNotAllowed)
			return
		}
		mu.Lock()
		if body == nil || time.Since(at) >= statusTTL {
			ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
			doc, err := src.build(ctx)
			cancel()
			if err != nil {
				mu.Unlock()
				http.Error(w, "status: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
			var b bytes.Buffer
			_ = writeStatusJSON(&b, doc)
			body, at = b.Bytes(), time.Now()
		}
		out := body
		mu.Unlock()
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(out)
	}), nil
}

// serveStatus adds /status and the status page (/) to the ops port.
func (d *daemon) serveStatus(mux *http.ServeMux) error {
	h, err := d.statusHandler()
	if err != nil {
		return err
	}
	mux.Handle("/status", h)
	mux.Handle("/{$}", statusPage())
	return nil
}
