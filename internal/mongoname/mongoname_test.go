package mongoname

import "testing"

func TestCollection(t *testing.T) {
	for name, ok := range map[string]bool{
		"leases": true, "a.b": true, "system": true,
		"": false, "a$b": false, "a\x00b": false, "system.x": false,
	} {
		if err := Collection(name); (err == nil) != ok {
			t.Errorf("Collection(%q) = %v, want ok %v", name, err, ok)
		}
	}
}
