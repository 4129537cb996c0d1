package ferry

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// layers is the package's files in data-path order: each file may use only
// what the files before it declare. Vocabulary first (errors, events,
// hooks, options), then the stages an event passes through, then the run
// that wires them.
var layers = []string{
	"doc.go",
	"errors.go",            // sentinel errors and the stop reasons
	"callctx.go",           // a handler call's context: cheap until waited on
	"draining.go",          // the drain's start, carried in a handler call's context
	"traceparent.go",       // W3C traceparent carried in a context
	"event.go",             // change and backfill events
	"fragments.go",         // reassembling split events
	"failure.go",           // which stops are failures
	"snapshotprogress.go",  // a snapshot's progress record and what Status shows of it
	"hooks.go",             // observers and run states
	"tracing.go",           // read and delivery hooks (trace context), read batches
	"handler.go",           // Handler, BatchHandler and Sweeper
	"batcherr.go",          // BatchError: per-event failures of a batch
	"partitioning.go",      // partitionings: a partition's hashed-_id range and match expression
	"options.go",           // options and their validation
	"identity.go",          // the stream's identity digest
	"consumer.go",          // the Consumer and its Status
	"partition.go",         // which documents a partition holds, and the partitioning a stream keeps
	"aliasing.go",          // events alias the driver's replies, on the drivers checked
	"window.go",            // stage: the bounded window between reader and lanes
	"tracker.go",           // stage: read → finished, the checkpointable position
	"health.go",            // the sink's health: outage or poison
	"inflight.go",          // a lane's handler call in flight, which a drain may leave
	"runner.go",            // one run's state
	"stream.go",            // opening the change stream (with the partition filter)
	"corruptcheckpoint.go", // a checkpoint that cannot be resumed from: its record, or its token
	"history.go",           // the start of the oplog window
	"dlqentry.go",          // dead-letter entries ↔ events
	"delivery.go",          // one handler call: its trace context, hooks and logger
	"lanes.go",             // stage: per-key lanes applying events, retries, poison
	"committer.go",         // stage: the commit loop and compare-and-set saves
	"backfill.go",          // what a snapshot needs of the source: namespaces, shard keys, server time
	"snapshotread.go",      // reading a snapshot chunk
	"snapshotspan.go",      // reading a span of the hashed range through a mongos
	"snapshot.go",          // snapshots: chunks spliced into the stream, progress in the checkpoint
	"fetch.go",             // stage: reading the server's batches ahead, into the window
	"reader.go",            // stage: reading the stream into the window
	"run.go",               // Run: the stages wired together, drain, final checkpoint
}

// TestFileLayering: no file of the package uses a declaration of a file
// that sits after it in layers, and every file is listed.
func TestFileLayering(t *testing.T) {
	fset := token.NewFileSet()
	paths, _ := filepath.Glob("*.go")
	files := map[string]*ast.File{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = f
		if !slices.Contains(layers, p) {
			t.Errorf("%s is not in layers: place it in the data-path order", p)
		}
	}
	rank := map[string]int{}
	for i, f := range layers {
		rank[f] = i
		if _, err := os.Stat(f); err != nil {
			t.Errorf("layers lists %s, which does not exist", f)
		}
	}
	// Top-level names and method names → declaring file.
	decl := map[string]string{}
	methods := map[string][]string{}
	for p, f := range files {
		for _, d := range f.Decls {
			switch x := d.(type) {
			case *ast.FuncDecl:
				if x.Recv != nil {
					methods[x.Name.Name] = append(methods[x.Name.Name], p)
				} else {
					decl[x.Name.Name] = p
				}
			case *ast.GenDecl:
				for _, s := range x.Specs {
					switch sp := s.(type) {
					case *ast.TypeSpec:
						decl[sp.Name.Name] = p
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							if n.Name != "_" {
								decl[n.Name] = p
							}
						}
					}
				}
			}
		}
	}
	type dep struct{ from, to, name string }
	var bad []dep
	for p, f := range files {
		use := func(name, to string) {
			if to != "" && to != p && rank[to] > rank[p] {
				bad = append(bad, dep{p, to, name})
			}
		}
		pkgs := map[string]bool{}
		for _, im := range f.Imports {
			name := strings.Trim(im.Path.Value, `"`)
			name = name[strings.LastIndex(name, "/")+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			pkgs[strings.TrimSuffix(name, "/v2")] = true
		}
		pkgs["v2"] = true
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.FuncDecl:
				// Its name declares; its receiver, type and body use.
				if x.Recv != nil {
					ast.Inspect(x.Recv, func(m ast.Node) bool {
						if id, ok := m.(*ast.Ident); ok {
							use(id.Name, decl[id.Name])
						}
						return true
					})
				}
				ast.Inspect(x.Type, func(m ast.Node) bool {
					if id, ok := m.(*ast.Ident); ok && (id.Obj == nil || id.Obj.Kind != ast.Var) {
						use(id.Name, decl[id.Name])
					}
					return true
				})
				if x.Body != nil {
					ast.Inspect(x.Body, func(m ast.Node) bool { return visit(m, use, methods, decl, pkgs) })
				}
				return false
			}
			return visit(n, use, methods, decl, pkgs)
		})
	}
	sort.Slice(bad, func(i, j int) bool { return bad[i].from+bad[i].name < bad[j].from+bad[j].name })
	seen := map[dep]bool{}
	for _, b := range bad {
		if !seen[b] {
			seen[b] = true
			t.Errorf("%s uses %s, declared in %s, which comes after it in the data path", b.from, b.name, b.to)
		}
	}
}

// visit records the uses in one node; it reports whether to descend.
func visit(n ast.Node, use func(name, file string), methods map[string][]string, decl map[string]string, pkgs map[string]bool) bool {
	switch x := n.(type) {
	case *ast.Field:
		// Field and parameter names declare; their types use.
		ast.Inspect(x.Type, func(m ast.Node) bool { return visit(m, use, methods, decl, pkgs) })
		return false
	case *ast.KeyValueExpr:
		// A struct literal's field names are not uses.
		if _, ok := x.Key.(*ast.Ident); ok {
			ast.Inspect(x.Value, func(m ast.Node) bool { return visit(m, use, methods, decl, pkgs) })
			return false
		}
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok && pkgs[id.Name] && id.Obj == nil {
			return false // pkg.Name: another package's
		}
		// A method (or field) selected from a value: the file declaring a
		// method of that name, when only one does.
		if ds := methods[x.Sel.Name]; len(ds) == 1 {
			use(x.Sel.Name, ds[0])
		}
		ast.Inspect(x.X, func(m ast.Node) bool { return visit(m, use, methods, decl, pkgs) })
		return false
	case *ast.Ident:
		if x.Obj == nil || x.Obj.Kind != ast.Var || x.Obj.Decl == nil {
			use(x.Name, decl[x.Name])
		}
	}
	return true
}
