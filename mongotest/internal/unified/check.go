package unified

import (
	"errors"
	"fmt"
)

// Check reports, without a server, everything in f that the runner does not
// support: entity kinds and their fields, operations per entity kind,
// expected event kinds. It returns nil when every test can at least be
// attempted.
func Check(f *File) error {
	var errs []error
	for i := range f.Tests {
		t := &f.Tests[i]
		if t.Problem != nil {
			errs = append(errs, t.Problem)
			continue
		}
		if err := checkTest(f, t); err != nil {
			errs = append(errs, fmt.Errorf("test %q: %w", t.Description, err))
		}
	}
	return errors.Join(errs...)
}

// checkTest is Check for one test.
func checkTest(f *File, t *Test) error {
	kinds := map[string]string{}
	declare := func(defs []EntityDef) error {
		for _, e := range defs {
			if err := parseEntitySpec(e); err != nil {
				return err
			}
			kinds[e.ID] = e.Kind
		}
		return nil
	}
	if err := declare(f.CreateEntities); err != nil {
		return err
	}
	for i, op := range t.Operations {
		where := fmt.Sprintf("operations[%d] %s.%s", i, op.Object, op.Name)
		if op.Object == "testRunner" {
			if _, ok := specialOps[op.Name]; !ok {
				return fmt.Errorf("unified runner: %s: operation testRunner.%s not supported", where, op.Name)
			}
			if op.Name == "createEntities" {
				r := newFields(op.Arguments, where)
				var defs []EntityDef
				for j, d := range r.docs("entities") {
					e, err := parseEntityDef(d, fmt.Sprintf("%s entities[%d]", where, j))
					if err != nil {
						return err
					}
					defs = append(defs, e)
				}
				if err := declare(defs); err != nil {
					return err
				}
			}
			continue
		}
		kind, ok := kinds[op.Object]
		if !ok {
			// An entity created by an operation the runner skipped
			// checking would land here too; both are the test's fault.
			return fmt.Errorf("%s: no entity %q", where, op.Object)
		}
		if _, ok := handlers[kind][op.Name]; !ok {
			return fmt.Errorf("unified runner: %s: operation %s not supported on a %s entity", where, op.Name, kind)
		}
		if op.SaveResultAsEntity != "" {
			k, ok := resultKinds[op.Name]
			if !ok {
				k = kindValue
			}
			kinds[op.SaveResultAsEntity] = k
		}
	}
	for _, ee := range t.ExpectEvents {
		if kinds[ee.Client] != kindClient {
			return fmt.Errorf("expectEvents: %q is not a client entity", ee.Client)
		}
		if err := checkExpectedEvents(ee); err != nil {
			return err
		}
	}
	return nil
}
