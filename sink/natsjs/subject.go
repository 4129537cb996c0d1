package natsjs

import (
	"fmt"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/natssubject"
)

// template is a parsed subject template (see package natssubject, shared
// with package config so that `ferry validate` applies the same rules).
type template struct{ t *natssubject.Template }

// parseTemplate parses and validates a subject template.
func parseTemplate(src string) (*template, error) {
	t, err := natssubject.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("natsjs: Subject(%q): %w", src, err)
	}
	return &template{t}, nil
}

// render returns the subject of an event.
func (t *template) render(ev *ferry.Event) string {
	return t.t.Render(ev.Namespace.DB, ev.Namespace.Coll, ev.OperationType)
}
