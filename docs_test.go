package ferry_test

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/ferry-io/ferry"
)

// TestDocsNameEventMembersAsTheyAre: where the README and docs/ name a
// member of an Event (ev.X), a method is called (ev.ID()) and a field is
// not: the README said "ev.ID is a stable idempotency key", and a user
// who wrote fmt.Println(ev.ID) printed a function value.
func TestDocsNameEventMembersAsTheyAre(t *testing.T) {
	files := []string{"README.md"}
	more, _ := os.ReadDir("docs")
	for _, f := range more {
		if strings.HasSuffix(f.Name(), ".md") {
			files = append(files, "docs/"+f.Name())
		}
	}
	ref := regexp.MustCompile(`\bev\.([A-Z]\w*)(\()?`)
	ptr, val := reflect.TypeOf(&ferry.Event{}), reflect.TypeOf(ferry.Event{})
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			seen++
			name, called := m[1], m[2] != ""
			_, isMethod := ptr.MethodByName(name)
			_, isField := val.FieldByName(name)
			switch {
			case isMethod && !called:
				t.Errorf("%s: %q names the method Event.%s without calling it: write ev.%s()", f, m[0], name, name)
			case isField && called:
				t.Errorf("%s: %q calls Event.%s, a field", f, m[0], name)
			case !isMethod && !isField:
				t.Errorf("%s: %q: Event has no member %s", f, m[0], name)
			}
		}
	}
	if seen == 0 {
		t.Fatal("the README names no Event member: the check checks nothing")
	}
}

// TestTransactionalModeDescribedOnce: what the transactional mode's
// transaction holds is said in one place, package group's "Transactional
// mode", and the ledger and mongostore docs point there. Before, the
// ledger and mongostore docs said the checkpoint's compare-and-set was in
// the transaction, while package group (and the code) write a fence
// document in it and the checkpoint after it.
func TestTransactionalModeDescribedOnce(t *testing.T) {
	comment := regexp.MustCompile(`(?m)^\s*//\s?`)
	// read returns a file's text, comment markers removed and white space
	// folded, so that sentences over several comment lines are one line.
	read := func(f string) string {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(comment.ReplaceAllString(string(b), "")), " ")
	}
	if !strings.Contains(read("group/doc.go"), "# Transactional mode This is the one description") {
		t.Error("group/doc.go has no \"Transactional mode\" section")
	}
	for _, f := range []string{"ledger/doc.go", "checkpoint/mongostore/mongostore.go"} {
		if !strings.Contains(read(f), `package group's doc, "Transactional mode"`) {
			t.Errorf("%s does not point to package group's doc, \"Transactional mode\"", f)
		}
	}
	cas := regexp.MustCompile(`checkpoint('s)? (CAS|compare-and-set)`)
	for _, f := range []string{"ledger/doc.go", "checkpoint/mongostore/mongostore.go", "group/doc.go", "README.md"} {
		text := read(f)
		for _, s := range strings.Split(text, ". ") {
			if strings.Contains(s, "transaction") && cas.MatchString(s) && !strings.Contains(s, "not") {
				t.Errorf("%s puts the checkpoint's compare-and-set in the transaction: %q", f, s)
			}
		}
	}
}
