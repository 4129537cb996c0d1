package stdout_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/sink/sinktest"
	"github.com/ferry-io/ferry/sink/stdout"
)

// TestRenderingUnchanged checks that a varied event set produces, byte for
// byte, the lines the sink wrote when it rendered with the driver's
// marshaller, in both modes.
func TestRenderingUnchanged(t *testing.T) {
	for _, canonical := range []bool{false, true} {
		var buf bytes.Buffer
		opts := []stdout.Option{stdout.Writer(&buf)}
		if canonical {
			opts = append(opts, stdout.Canonical())
		}
		s, err := stdout.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := s.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		evs := sinktest.VariedEvents(3)
		if err := s.Write(ctx, evs); err != nil {
			t.Fatal(err)
		}
		var want []byte
		for _, ev := range evs {
			js, err := bson.MarshalExtJSON(ev.Raw, canonical, false)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, `{"id":"`+ev.ID()+`","epoch":`+strconv.FormatInt(ev.Epoch, 10)+`,"op":"`+ev.OperationType+`","event":`...)
			want = append(want, js...)
			want = append(want, "}\n"...)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("canonical=%v: output differs from the driver-rendered lines\n got %s\nwant %s", canonical, buf.Bytes(), want)
		}

		// And through the suite's line parser.
		l := &lines{fail: map[string]bool{}}
		opts = []stdout.Option{stdout.Writer(l)}
		if canonical {
			opts = append(opts, stdout.Canonical())
		}
		s2, err := stdout.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		sinktest.CheckRendering(t, s2, l, canonical)
		l.check(t)
	}
}
