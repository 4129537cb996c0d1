package config_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

// TestHostileInputs feeds inputs meant to exhaust a parser: alias bombs,
// recursive aliases, deep nesting. Each must end with an error.
func TestHostileInputs(t *testing.T) {
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		bomb += n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = n
	}
	pipelineBomb := strings.Replace(bomb, "a: &a", "x0: &a", 1)
	pipelineBomb = "streams:\n  - name: s\n    source:\n      uri: mongodb://h\n      scope: {cluster: true}\n      pipeline:\n        - $match:\n" +
		indent(pipelineBomb, "            ") + "    sink: {stdout: }\n"
	mergeBomb := "m0: &m0 {k: 1}\n"
	for i := 1; i < 30; i++ {
		mergeBomb += "m" + itoa(i) + ": &m" + itoa(i) + " {<<: [*m" + itoa(i-1) + ", *m" + itoa(i-1) + ", *m" + itoa(i-1) + "]}\n"
	}
	mergeBomb += "streams:\n  - <<: *m29\n"
	for name, in := range map[string]string{
		"alias bomb":      bomb + "streams: *i\n",
		"pipeline bomb":   pipelineBomb,
		"merge bomb":      mergeBomb,
		"deep flow":       "streams: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n",
		"deep pipeline":   "streams: [{source: {pipeline: [{$match: " + strings.Repeat("{a: ", 2000) + "1" + strings.Repeat("}", 2000) + "}]}}]\n",
		"recursive alias": "streams: &s [*s]\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.Parse([]byte(in), nil)
			if err == nil {
				t.Fatal("accepted")
			}
			if len(err.Error()) > 1<<20 {
				t.Errorf("error text of %d bytes", len(err.Error()))
			}
		})
	}
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}

func itoa(i int) string { return strconv.Itoa(i) }
