package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// maxNodes bounds the YAML nodes one Parse visits, aliases included, so a
// "billion laughs" document or a recursive alias cannot exhaust memory.
const maxNodes = 200_000

// decoder walks the parsed YAML tree, expanding ${ENV} references in
// scalars and collecting every problem with its path.
type decoder struct {
	env func(string) (string, bool)
	// unused reports the paths the command does not read (LoadOption
	// Unused): an unset variable there is not a problem. unset lists
	// the paths where one was met.
	unused   func(path string) bool
	unset    []string
	problems []Problem
	seen     map[Problem]bool
	visited  int
}

// maxProblems bounds the problems reported; hostile input could otherwise
// produce millions.
const maxProblems = 100

func (d *decoder) add(path, format string, args ...any) {
	p := Problem{Path: path, Message: fmt.Sprintf(format, args...)}
	if d.seen[p] || len(d.problems) > maxProblems {
		return
	}
	if d.seen == nil {
		d.seen = map[Problem]bool{}
	}
	d.seen[p] = true
	if len(d.problems) == maxProblems {
		p = Problem{Message: fmt.Sprintf("more than %d problems; fix these first", maxProblems)}
	}
	d.problems = append(d.problems, p)
}

// deref follows aliases; nil means "give up" (too many nodes or a cycle).
func (d *decoder) deref(path string, n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 100 {
			d.add(path, "alias chain too long")
			return nil
		}
		n = n.Alias
	}
	d.visited++
	if d.visited == maxNodes+1 {
		d.add(path, "document too large (more than %d nodes with aliases expanded)", maxNodes)
	}
	if d.visited > maxNodes {
		return nil
	}
	return n
}

// isNull reports an explicit null (`key:`, `key: ~`, `key: null`).
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// field handles the value of one known key.
type field func(path string, v *yaml.Node)

// pairs returns a mapping's key/value pairs in document order, with merge
// keys (`<<: *base`) expanded: explicit keys win over merged ones.
func (d *decoder) pairs(path string, n *yaml.Node, depth int) [][2]*yaml.Node {
	if depth > 20 {
		d.add(path, "merge keys nested too deeply")
		return nil
	}
	var out, merged [][2]*yaml.Node
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() != "!!merge" {
			if seen[k.Value] {
				d.add(join(path, k.Value), "is defined twice in the same mapping")
				continue
			}
			seen[k.Value] = true
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			v = d.deref(path, v)
			if v == nil {
				continue
			}
			var srcs []*yaml.Node
			switch v.Kind {
			case yaml.MappingNode:
				srcs = []*yaml.Node{v}
			case yaml.SequenceNode:
				for _, s := range v.Content {
					if s = d.deref(path, s); s != nil {
						srcs = append(srcs, s)
					}
				}
			}
			for _, s := range srcs {
				if s.Kind != yaml.MappingNode {
					d.add(path, "a merge key (<<) must refer to a mapping")
					continue
				}
				merged = append(merged, d.pairs(path, s, depth+1)...)
			}
			continue
		}
		out = append(out, [2]*yaml.Node{k, v})
	}
	for _, m := range merged {
		if !slices.ContainsFunc(out, func(p [2]*yaml.Node) bool { return p[0].Value == m[0].Value }) {
			out = append(out, m)
		}
	}
	return out
}

// mapping decodes a mapping whose keys must all be in fields. It returns
// false if n is not a mapping (already reported).
func (d *decoder) mapping(path string, n *yaml.Node, fields map[string]field) bool {
	n = d.deref(path, n)
	if n == nil {
		return false
	}
	if n.Kind != yaml.MappingNode {
		d.add(path, "must be a mapping, got %s", kindName(n))
		return false
	}
	for _, kv := range d.pairs(path, n, 0) {
		k := d.deref(path, kv[0])
		if k == nil {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.add(path, "keys must be strings")
			continue
		}
		f, ok := fields[k.Value]
		if !ok {
			d.add(join(path, k.Value), "unknown key (known keys: %s)", knownKeys(fields))
			continue
		}
		v := d.deref(join(path, k.Value), kv[1])
		if v == nil {
			continue
		}
		f(join(path, k.Value), v)
	}
	return true
}

func knownKeys(fields map[string]field) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.DocumentNode:
		return "a document"
	}
	switch n.ShortTag() {
	case "!!null":
		return "null"
	case "!!bool":
		return "a boolean"
	case "!!int", "!!float":
		return "a number"
	}
	return "a string"
}

// scalar returns the scalar's text with ${ENV} references expanded.
func (d *decoder) scalar(path string, n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.add(path, "must be a single value, got %s", kindName(n))
		return "", false
	}
	s, err := expand(n.Value, d.env)
	if err != nil {
		var unset *unsetError
		if errors.As(err, &unset) && d.unused != nil && d.unused(path) {
			d.unset = append(d.unset, path)
			return "", false
		}
		d.add(path, "%v", err)
		return "", false
	}
	return s, true
}

// str decodes a string; null leaves *dst unchanged.
func (d *decoder) str(path string, n *yaml.Node, dst *string) {
	if isNull(n) {
		return
	}
	if s, ok := d.scalar(path, n); ok {
		*dst = s
	}
}

func (d *decoder) boolean(path string, n *yaml.Node, dst *bool) {
	if isNull(n) {
		return
	}
	s, ok := d.scalar(path, n)
	if !ok {
		return
	}
	switch strings.ToLower(s) {
	case "true", "yes", "on":
		*dst = true
	case "false", "no", "off":
		*dst = false
	default:
		d.add(path, "must be true or false, got %s", quote(s))
	}
}

// integer decodes an integer in [min, max].
func (d *decoder) integer(path string, n *yaml.Node, dst *int64, min, max int64) {
	if isNull(n) {
		return
	}
	s, ok := d.scalar(path, n)
	if !ok {
		return
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
	if err != nil {
		d.add(path, "must be a whole number, got %s", quote(s))
		return
	}
	if v < min || v > max {
		if max >= math.MaxInt32 {
			d.add(path, "must be at least %d, got %d", min, v)
		} else {
			d.add(path, "must be between %d and %d, got %d", min, max, v)
		}
		return
	}
	*dst = v
}

func (d *decoder) intField(path string, n *yaml.Node, dst *int, min, max int64) {
	v := int64(*dst)
	d.integer(path, n, &v, min, max)
	*dst = int(v)
}

// duration decodes a Go duration string ("250ms", "10s", "1m30s") that must
// be at least min.
func (d *decoder) duration(path string, n *yaml.Node, dst *time.Duration, min time.Duration) {
	if isNull(n) {
		return
	}
	s, ok := d.scalar(path, n)
	if !ok {
		return
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.add(path, "must be a duration such as \"500ms\", \"10s\" or \"1m\", got %s", quote(s))
		return
	}
	if v < min {
		if min == time.Nanosecond {
			d.add(path, "must be positive, got %s", quote(s))
		} else {
			d.add(path, "must be at least %v, got %s", min, quote(s))
		}
		return
	}
	*dst = v
}

// rate decodes a non-negative number of documents per second (0: no cap),
// whole or decimal.
func (d *decoder) rate(path string, n *yaml.Node, dst *float64) {
	if isNull(n) {
		return
	}
	s, ok := d.scalar(path, n)
	if !ok {
		return
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.add(path, "must be a number of documents per second such as 500 or 12.5 (0: no cap), got %s", quote(s))
		return
	}
	if v < 0 || v > maxSnapshotRate {
		d.add(path, "must be 0 (no cap) or a positive number of documents per second up to %g, got %s", float64(maxSnapshotRate), quote(s))
		return
	}
	*dst = v
}

// size decodes a byte count: a whole number, or one with a unit (KB, MB,
// GB: powers of 1000; KiB, MiB, GiB: powers of 1024).
func (d *decoder) size(path string, n *yaml.Node, dst *int64) {
	if isNull(n) {
		return
	}
	s, ok := d.scalar(path, n)
	if !ok {
		return
	}
	v, err := parseSize(s)
	if err != nil {
		d.add(path, "must be a positive byte size such as 67108864 or \"64MiB\", got %s", quote(s))
		return
	}
	*dst = v
}

func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(t, "_", ""), 10, 64)
	if err != nil || v < 1 || v > math.MaxInt64/mult {
		return 0, fmt.Errorf("bad size")
	}
	return v * mult, nil
}

// enum decodes one of the allowed words.
func (d *decoder) enum(path string, n *yaml.Node, dst *string, allowed ...string) {
	if isNull(n) {
		return
	}
	s, ok := d.scalar(path, n)
	if !ok {
		return
	}
	if !slices.Contains(allowed, s) {
		d.add(path, "must be one of %s, got %s", strings.Join(allowed, ", "), quote(s))
		return
	}
	*dst = s
}

// quote shows a user-supplied value in an error, shortened. It is used only
// for fields that are never secret.
func quote(s string) string {
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return strconv.Quote(s)
}
