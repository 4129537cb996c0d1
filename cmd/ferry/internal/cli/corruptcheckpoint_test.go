package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
)

// corruptRecordName is how every message names partition 0's checkpoint
// record of stream orders: its collection and _id.
const corruptRecordName = `ferry.checkpoints _id "orders/0"`

// TestCorruptCheckpointRecord, as the operator met it: a stream's
// checkpoint record is damaged by hand (with the driver), in three ways —
// a token that is a string, a version "ten", a missing token. Each time
// the member fails with corrupt-checkpoint (never re-checked by itself),
// and every message names the record's collection and _id: /readyz, ferry
// status and ferry position show (which still work for the stream) and
// ferry verify. ferry reset and ferry position set then work over the
// record without decoding it, and the failed member runs again without a
// restart.
func TestCorruptCheckpointRecord(t *testing.T) {
	runCorruptCheckpointCases(t, []corruptCase{
		{name: "token as a string", update: bson.D{{Key: "$set", Value: bson.D{{Key: "token", Value: "x"}}}},
			problem: "field token has BSON type string", fix: []string{"reset", "-yes"}},
		{name: "version ten", update: bson.D{{Key: "$set", Value: bson.D{{Key: "version", Value: "ten"}}}},
			problem: "field version has BSON type string", fix: []string{"position", "set", "-time", "", "-yes"}},
		{name: "token missing", update: bson.D{{Key: "$unset", Value: bson.D{{Key: "token", Value: ""}}}},
			problem: "field token is missing", fix: []string{"reset", "-yes"}},
	})
}

// TestBadResumeTokenIsCorruptCheckpoint: a checkpoint whose token is a
// valid BSON document but whose _data is no resume token. The server
// refuses to open the stream at it; the member fails with
// corrupt-checkpoint, naming the record and pointing at ferry position
// set and ferry reset — not with a server-error re-checked with backoff
// for ever — and position set gets it going again.
func TestBadResumeTokenIsCorruptCheckpoint(t *testing.T) {
	badData, _ := bson.Marshal(bson.D{{Key: "_data", Value: "zz-not-a-resume-token"}})
	runCorruptCheckpointCases(t, []corruptCase{
		{name: "token with a bad _data", update: bson.D{{Key: "$set", Value: bson.D{{Key: "token", Value: bson.Binary{Data: badData}}}}},
			problem: "resume token", readable: true, fix: []string{"position", "set", "-time", "", "-yes"}},
	})
}

// corruptCase is one way of damaging partition 0's checkpoint record, and
// the command that gets the stream going again.
type corruptCase struct {
	name     string
	update   bson.D
	problem  string // what the messages say is wrong
	readable bool   // the record decodes: only the server refuses its token
	fix      []string
}

func runCorruptCheckpointCases(t *testing.T, cases []corruptCase) {
	e := newProcEnv(t)
	rcv := newReceiver(t)
	cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""))
	m := startMember(t, cfg, "m0")
	waitStartedIn(t, e, "orders", 2)
	m.stop(syscall.SIGTERM)
	checkpoints := e.client.Database("ferry").Collection("checkpoints")

	for i, tc := range cases {
		t.Logf("case %d: %s", i, tc.name)
		if _, err := checkpoints.UpdateOne(context.Background(), bson.D{{Key: "_id", Value: "orders/0"}}, tc.update); err != nil {
			t.Fatal(err)
		}

		// Status and position show still work, naming the record (a token
		// with a bad _data reads fine: only the server refuses it, below).
		code, out, errOut := ferryCmd("status", "-c", cfg)
		if code != 0 {
			t.Fatalf("%s: ferry status: exit %d, want 0:\n%s%s", tc.name, code, out, errOut)
		}
		if !tc.readable {
			if !strings.Contains(out, corruptRecordName) || !strings.Contains(out, tc.problem) {
				t.Errorf("%s: ferry status does not name the record (%s) and say what is wrong (%s):\n%s", tc.name, corruptRecordName, tc.problem, out)
			}
			code, out, errOut = ferryCmd("position", "show", "-c", cfg, "-stream", "orders")
			if code != 0 || !strings.Contains(out, corruptRecordName) || !strings.Contains(out, tc.problem) {
				t.Errorf("%s: ferry position show: exit %d, want 0 naming the record and the problem:\n%s%s", tc.name, code, out, errOut)
			}
			code, out, errOut = ferryCmd("verify", "-c", cfg, "-stream", "orders", "-since", "1m")
			if code == 0 || !strings.Contains(out+errOut, corruptRecordName) {
				t.Errorf("%s: ferry verify: exit %d, want a failure naming the record:\n%s%s", tc.name, code, out, errOut)
			}
		}

		// The member fails, naming the record, and is not re-checked by itself.
		m = startMember(t, cfg, fmt.Sprintf("m%d", i+1))
		var body string
		poll.Until(t, 30*time.Second, func() error {
			var code int
			code, body = m.get("/readyz")
			if code != http.StatusServiceUnavailable || !strings.Contains(body, "corrupt-checkpoint") {
				return fmt.Errorf("/readyz: %d %s; want 503 with corrupt-checkpoint", code, body)
			}
			return nil
		})
		for _, want := range []string{corruptRecordName, tc.problem, "ferry position set", "ferry reset", "never by itself"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: /readyz does not say %q:\n%s", tc.name, want, body)
			}
		}
		code, out, errOut = ferryCmd("status", "-c", cfg)
		if code != 0 || !strings.Contains(out, "stream orders: failed") || !strings.Contains(out, "corrupt-checkpoint") ||
			!strings.Contains(out, corruptRecordName) {
			t.Errorf("%s: ferry status while failed: exit %d:\n%s%s", tc.name, code, out, errOut)
		}

		// The fix works over the record, and the member runs again.
		args := append([]string{}, tc.fix...)
		for j, a := range args {
			if a == "" {
				args[j] = e.srv.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
			}
		}
		args = append(args, "-c", cfg, "-stream", "orders")
		code, out, errOut = ferryCmd(args...)
		if code != 0 || !tc.readable && !strings.Contains(out, corruptRecordName) {
			t.Fatalf("%s: ferry %s: exit %d, want 0 and the record named:\n%s%s", tc.name, strings.Join(args, " "), code, out, errOut)
		}
		poll.Until(t, 30*time.Second, func() error {
			if code, body := m.get("/readyz"); code != http.StatusOK {
				return fmt.Errorf("/readyz after ferry %s: %d %s", tc.fix[0], code, body)
			}
			return nil
		})
		waitStartedIn(t, e, "orders", 2)
		m.stop(syscall.SIGTERM)
	}
}
