package group

import (
	"context"

	"github.com/ferry-io/ferry"
)

// resolvePartitioning decides, before any partition runs, the
// partitioning every partition of the stream runs with
// (ferry.ResolvePartitioning over the stream's checkpoints): the one
// group.Partitioning sets; else HashMod for a stream that checkpointed
// under it, logged once, and HashRange otherwise. Each partition's
// consumer and sweeper then get the same one, so the partitions agree
// whatever each one's own checkpoint holds. Checkpoints of both
// partitionings are a failure (identity-changed).
func (g *Group) resolvePartitioning(ctx context.Context) error {
	cfg := &g.cfg
	// The consumers' definition, with the partitioning as configured (a
	// later option overrides an earlier one; "" is unset).
	opts := append(g.consumerOptions(0, 0), ferry.WithPartitioning(cfg.partitioning))
	p, adopted, err := ferry.ResolvePartitioning(ctx, g.cps, opts...)
	if err != nil {
		return err
	}
	if adopted && g.scheme != p {
		g.log.Info(ferry.HashModNote(cfg.name, cfg.partitions))
	}
	g.scheme = p
	return nil
}

// partitioning is what the partitions run with: the resolved one once Run
// resolved it, before that the configured one ("" when unset).
func (g *Group) partitioning() ferry.Partitioning {
	if g.scheme != "" {
		return g.scheme
	}
	switch p := g.cfg.partitioning; p {
	case ferry.HashRange, ferry.HashMod:
		return p
	}
	return ""
}
