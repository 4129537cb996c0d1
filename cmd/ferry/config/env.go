package config

import (
	"fmt"
	"strings"
)

// expand replaces ${NAME} and ${NAME:-default} in s with values from env.
// "$${" stands for a literal "${"; a "$" not followed by "{" is kept as is
// (so pipeline field paths such as "$fullDocument.status" need no escaping).
// An unset variable without a default is an error naming the variable; an
// empty variable is used as is by ${NAME} and replaced by the default by
// ${NAME:-default} (as in the POSIX shell). Errors never contain values.
func expand(s string, env func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ (write $${ for a literal ${)")
		}
		ref := s[i+2 : i+2+end]
		i += end + 3
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validEnvName(name) {
			return "", fmt.Errorf("%s is not a valid environment variable reference (use ${NAME} or ${NAME:-default})", quote("${"+name+"}"))
		}
		v, ok := "", false
		if env != nil {
			v, ok = env(name)
		}
		switch {
		case hasDef && (!ok || v == ""):
			v = def
		case !ok:
			return "", &unsetError{name: name}
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// unsetError is expand's error for a ${NAME} without a default whose
// variable is not set.
type unsetError struct{ name string }

func (e *unsetError) Error() string {
	return fmt.Sprintf("environment variable %s is not set (set it, or write ${%s:-default})", e.name, e.name)
}
