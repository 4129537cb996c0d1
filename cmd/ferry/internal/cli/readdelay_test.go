package cli

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/mongotest"
)

// statusRow matches a partition row of `ferry status`: partition, owner,
// epoch, checkpoint age, lag, read delay.
var statusRow = regexp.MustCompile(`(?m)^  (\d+)\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+)\s`)

// TestStatusShowsIdleShardReadDelay: `ferry run` on a sharded cluster
// whose second shard is idle (the collection, sharded on _id, in one
// chunk on shard0; shard1's no-op every 1.5 s): each write, made once the previous one was delivered,
// waits at the mongos for that shard's next no-op, and `ferry status`'s
// read delay column and ferry_read_delay_seconds on /metrics show it.
func TestStatusShowsIdleShardReadDelay(t *testing.T) {
	const interval = 1500 * time.Millisecond
	sc := mongotest.NewSharded(t, 2, mongotest.NoopInterval(interval))
	client, err := mongo.Connect(options.Client().ApplyURI(sc.URI()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	ctx := context.Background()
	admin := client.Database("admin")
	if err := admin.RunCommand(ctx, bson.D{{Key: "enableSharding", Value: "shop"}, {Key: "primaryShard", Value: "shard0"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "shardCollection", Value: "shop.orders"}, {Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	rcv := newReceiver(t)
	cfg := writeFile(t, streamYAML(sc.URI(), "orders", rcv.url(), "", ""))
	d := startRun(t, cfg)
	addr := d.addr(t)
	waitStartedIn(t, &procEnv{t: t, client: client}, "orders", 2)
	for i := range 4 {
		id := fmt.Sprintf("o-%d", i)
		if _, err := client.Database("shop").Collection("orders").InsertOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 20*time.Second, func() error {
			if err := rcv.deliveredAtLeast(i + 1)(); err != nil {
				return fmt.Errorf("%w\n%s", err, tail(d.errOut.String(), 3000))
			}
			return nil
		})
	}
	var out string
	poll.Until(t, 20*time.Second, func() error {
		code, o, errOut := runCLI("status", "-c", cfg)
		out = o
		if code != 0 {
			return fmt.Errorf("ferry status: exit %d: %s", code, errOut)
		}
		var most time.Duration
		for _, m := range statusRow.FindAllStringSubmatch(o, -1) {
			if dd, err := time.ParseDuration(m[2]); err == nil {
				most = max(most, dd)
			}
		}
		if most < interval/2 {
			return fmt.Errorf("the largest read delay `ferry status` shows is %v, want about the idle shard's no-op interval %v:\n%s", most, interval, o)
		}
		return nil
	})
	if !strings.Contains(out, "read delay") {
		t.Fatalf("ferry status has no read delay column:\n%s", out)
	}
	code, body := getBody(t, "http://"+addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	var most float64
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "ferry_read_delay_seconds{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			most = max(most, v)
		}
	}
	if most < (interval / 2).Seconds() {
		t.Fatalf("ferry_read_delay_seconds at most %v, want about %v:\n%s", most, interval, body)
	}
	t.Logf("ferry status:\n%s/metrics: ferry_read_delay_seconds up to %.3f", out, most)
	d.stop(t)
}
