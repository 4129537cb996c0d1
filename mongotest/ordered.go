package mongotest

import (
	"slices"
	"sort"
)

// ordered is a sorted set of items (no two equal by cmp), kept as a list
// of sorted blocks of at most maxBlock items: an index's entries in key
// order.
//
// Finding an item's place is two binary searches (over the blocks' last
// items, then inside a block); an insert moves at most maxBlock items of
// one block, and a block split moves the block list (n/maxBlock slice
// headers: about 2,000 to 4,000 at 1M items, once every few hundred
// inserts at least). Items appended past the last one (increasing keys,
// as ObjectIds are) fill blocks completely; elsewhere a full block splits
// in two halves, so blocks are at least half full. load refills it in
// order, three quarters full.
type ordered[T any] struct {
	cmp    func(a, b T) int
	blocks [][]T
	n      int
}

const maxBlock = 512

func newOrdered[T any](cmp func(a, b T) int) *ordered[T] {
	return &ordered[T]{cmp: cmp}
}

// Len is the number of items.
func (o *ordered[T]) Len() int { return o.n }

// position is an item's place: block b, index i inside it.
type position struct{ b, i int }

// seek returns the place of the first item for which probe(item) >= 0
// (probe must be non-decreasing over the items: negative before the place
// sought), or the end.
func (o *ordered[T]) seek(probe func(T) int) position {
	b := sort.Search(len(o.blocks), func(i int) bool {
		blk := o.blocks[i]
		return probe(blk[len(blk)-1]) >= 0
	})
	if b == len(o.blocks) {
		return position{b: b}
	}
	blk := o.blocks[b]
	return position{b: b, i: sort.Search(len(blk), func(i int) bool { return probe(blk[i]) >= 0 })}
}

// ascend calls fn with the items from p on, in order, until fn returns
// false. fn must not change o.
func (o *ordered[T]) ascend(p position, fn func(T) bool) {
	for b := p.b; b < len(o.blocks); b++ {
		blk := o.blocks[b]
		i := 0
		if b == p.b {
			i = p.i
		}
		for ; i < len(blk); i++ {
			if !fn(blk[i]) {
				return
			}
		}
	}
}

// ascendTouched is ascend that, before fn sees a run of up to window
// items, calls touch with each of them in a tight loop: a scan that reads
// memory each item points to (a record, in no order the memory has) then
// has the fetches of a whole run in flight together, rather than one
// item's at a time between fn's work.
func (o *ordered[T]) ascendTouched(p position, window int, touch func(T), fn func(T) bool) {
	for b := p.b; b < len(o.blocks); b++ {
		blk := o.blocks[b]
		i := 0
		if b == p.b {
			i = p.i
		}
		for i < len(blk) {
			run := blk[i:min(i+window, len(blk))]
			for _, x := range run {
				touch(x)
			}
			for _, x := range run {
				if !fn(x) {
					return
				}
			}
			i += len(run)
		}
	}
}

// insert adds x; it reports false (and changes nothing) when an equal item
// is there already.
func (o *ordered[T]) insert(x T) bool {
	if len(o.blocks) == 0 {
		o.blocks = append(o.blocks, append(make([]T, 0, 8), x))
		o.n++
		return true
	}
	p := o.seek(func(y T) int { return o.cmp(y, x) })
	if p.b == len(o.blocks) { // after every item: the end of the last block
		p.b--
		p.i = len(o.blocks[p.b])
	} else if o.cmp(o.blocks[p.b][p.i], x) == 0 {
		return false
	}
	blk := o.blocks[p.b]
	if len(blk) >= maxBlock {
		if p.b == len(o.blocks)-1 && p.i == len(blk) {
			// Appending past the last item: a new block, so that
			// increasing keys leave full blocks behind.
			o.blocks = append(o.blocks, append(make([]T, 0, 8), x))
			o.n++
			return true
		}
		half := len(blk) / 2
		left := append(make([]T, 0, maxBlock), blk[:half]...)
		right := append(make([]T, 0, maxBlock), blk[half:]...)
		o.blocks[p.b] = left
		o.blocks = slices.Insert(o.blocks, p.b+1, right)
		if p.i > half {
			p.b, p.i = p.b+1, p.i-half
		}
		blk = o.blocks[p.b]
	}
	o.blocks[p.b] = slices.Insert(blk, p.i, x)
	o.n++
	return true
}

// load replaces the contents with items, which must be sorted by cmp
// without repeats: an index built over existing documents, or what is
// left of one when deleted records go (entries are never removed one by
// one).
func (o *ordered[T]) load(items []T) {
	o.blocks, o.n = nil, len(items)
	const fill = maxBlock * 3 / 4
	for len(items) > 0 {
		k := min(fill, len(items))
		o.blocks = append(o.blocks, append(make([]T, 0, k), items[:k]...))
		items = items[k:]
	}
}
