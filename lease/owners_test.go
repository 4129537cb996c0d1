package lease_test

import (
	"maps"
	"testing"

	"github.com/ferry-io/ferry/lease"
)

// TestOwners: only leases held live count; released and expired ones are
// free.
func TestOwners(t *testing.T) {
	got := lease.Owners([]lease.Lease{
		{Partition: 0, Owner: "a"},
		{Partition: 1, Owner: ""},
		{Partition: 2, Owner: "b", Expired: true},
		{Partition: 3, Owner: "b"},
	})
	if want := map[int]string{0: "a", 3: "b"}; !maps.Equal(got, want) {
		t.Fatalf("Owners = %v, want %v", got, want)
	}
}
