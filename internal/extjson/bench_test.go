package extjson_test

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/extjson"
	"github.com/ferry-io/ferry/sink/sinktest"
)

// BenchmarkRender renders a ~1.4 KB change event (sinktest.LargeEvent)
// with the driver's marshaller and with this package, in both modes, and
// prints the ratios of one run:
//
//	relaxed: driver N ns/op A allocs/op, extjson M ns/op B allocs/op, R× faster
func BenchmarkRender(b *testing.B) {
	raw := sinktest.LargeEvent(1, 1).Raw
	type result struct{ ns, allocs float64 }
	for _, canonical := range []bool{false, true} {
		mode := "relaxed"
		if canonical {
			mode = "canonical"
		}
		res := map[string]result{}
		run := func(name string, render func() error) {
			b.Run(mode+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				for b.Loop() {
					if err := render(); err != nil {
						b.Fatal(err)
					}
				}
				res[name] = result{ns: float64(b.Elapsed().Nanoseconds()) / float64(b.N)}
			})
			r := res[name]
			r.allocs = testing.AllocsPerRun(100, func() { _ = render() })
			res[name] = r
		}
		run("driver", func() error { _, err := bson.MarshalExtJSON(raw, canonical, false); return err })
		run("extjson", func() error { _, err := extjson.Marshal(raw, canonical); return err })
		var buf []byte
		run("extjson-append", func() error {
			var err error
			buf, err = extjson.Append(buf[:0], raw, canonical)
			return err
		})
		d, e := res["driver"], res["extjson"]
		if d.ns > 0 && e.ns > 0 {
			fmt.Printf("%s, %d-byte event: driver %.0f ns/op %.0f allocs/op, extjson %.0f ns/op %.0f allocs/op, %.1fx faster\n",
				mode, len(raw), d.ns, d.allocs, e.ns, e.allocs, d.ns/e.ns)
		}
	}
}
