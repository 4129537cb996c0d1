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

func TestDatabase(t *testing.T) {
	for name, ok := range map[string]bool{
		"shop": true, "ferry_state": true, "a-b": true,
		"": false, "a.b": false, "a b": false, "a/b": false, "a$": false, "a\x00": false, "a*": false,
		"x123456789012345678901234567890123456789012345678901234567890123": false, // 64 bytes
	} {
		if err := Database(name); (err == nil) != ok {
			t.Errorf("Database(%q) = %v, want ok %v", name, err, ok)
		}
	}
}
