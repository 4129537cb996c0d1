package ferry_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
)

func nopHandler(context.Context, *ferry.Event) error { return nil }

// configProblems returns the problems NewConsumer reports for opts (with
// no client, which is one of them).
func configProblems(t *testing.T, opts ...ferry.Option) []string {
	t.Helper()
	_, err := ferry.NewConsumer(nil, nopHandler, opts...)
	var ce *ferry.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("NewConsumer = %v, want a *ConfigError", err)
	}
	return ce.Problems
}

// TestOptionsEveryProblemNamed: NewConsumer validates once and reports
// every problem, each prefixed by the option to fix.
func TestOptionsEveryProblemNamed(t *testing.T) {
	got := configProblems(t,
		ferry.Concurrency(0),
		nil,
		ferry.QueueLimit(0, 1),
		ferry.OnPoison("drop"),
		ferry.Partition(3, 2),
		ferry.WithHooks(struct{}{}),
		ferry.Retry(1, 0, 0),
	)
	for _, want := range []string{
		"client: ",
		"nil option: option 2 of 7 is nil",
		"Stream: a stream name is required",
		"scope: choose what to watch",
		"Checkpoints: a checkpoint store is required",
		`OnPoison: "drop" is not a policy`,
		"Partition: partition 3 is out of range [0, 2)",
		"Concurrency: must be at least 1, got 0",
		"QueueLimit: both limits must be positive",
		"WithHooks: hook 0 (struct {}) implements none of",
		"Retry: need 0 < min <= max backoff",
	} {
		found := false
		for _, p := range got {
			found = found || strings.HasPrefix(p, want)
		}
		if !found {
			t.Errorf("no problem starts with %q; got:\n  %s", want, strings.Join(got, "\n  "))
		}
	}
}

// TestOptionsLaterOverridesEarlier: options record values; only the final
// configuration is validated.
func TestOptionsLaterOverridesEarlier(t *testing.T) {
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	got := configProblems(t, ferry.Stream("s"), ferry.WatchCluster(), ferry.Concurrency(0), ferry.Concurrency(4),
		ferry.OnPoison(ferry.PoisonStall), ferry.Checkpoints(store))
	if len(got) != 1 || !strings.HasPrefix(got[0], "client: ") {
		t.Fatalf("problems = %q, want only the missing client", got)
	}
}

// TestOptionNames: every option is named as its problems name it, so that
// whoever passes options on can refuse some by name.
func TestOptionNames(t *testing.T) {
	got := ferry.OptionNames(ferry.Stream("s"), nil, ferry.DrainTimeout(0), ferry.DeadLetters(nil), ferry.BatchSize(1), ferry.WithHooks())
	want := []string{"Stream", "", "DrainTimeout", "DeadLetters", "BatchSize", "WithHooks"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("OptionNames = %q, want %q", got, want)
	}
}
