package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func TestLeakedFindsAGoroutineAndThenNone(t *testing.T) {
	stop := make(chan struct{})
	go func() { <-stop }()
	leaked := Leaked(50 * time.Millisecond)
	if len(leaked) != 1 || !strings.Contains(leaked[0], "leakcheck.TestLeakedFindsAGoroutineAndThenNone") {
		t.Fatalf("want the one leaked goroutine, got %d:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
	close(stop)
	if leaked := Leaked(2 * time.Second); len(leaked) != 0 {
		t.Fatalf("after it ended: %d leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}
