package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// workload is what the clients run: a random mix of operations on a few
// paths, with contents an edit's outcome can be computed from.
type workload struct {
	paths []string
	// pairs keeps every Move within a pair of paths (0↔1, 2↔3), so the
	// history splits into one partition per pair; else a Move may join
	// any two paths and the history is one partition.
	pairs bool
	// noCommits leaves Commits out of the mix (their share goes to Reads).
	noCommits bool
	// tornCommits sends each Commit as its single calls one after the
	// other (executeTorn): a server that applies changesets without
	// atomicity, which the checker must reject.
	tornCommits bool
	// branch is the branch every call works in (empty: the base).
	branch string
	// grep puts Greps over every path in the mix (their share goes to
	// Reads otherwise). Never with pairs: a Grep spans both pairs.
	grep bool
}

// letters are the tokens of a file's content that edits replace. A
// content is a unique tag (writer and sequence, no lowercase letter) and
// one to three tokens: "W3.17 a b a". An edit replaces one letter with
// another, so it may match once, several times or not at all, and the
// model computes which.
const letters = "abc"

// weights is the mix, in parts per hundred.
var weights = []struct {
	weight int
	gen    func(*client) Input
}{
	{15, (*client).read},
	{5, (*client).grep},
	{8, (*client).commit},
	{12, (*client).write},
	{8, (*client).writeCreateOnly},
	{10, (*client).writeIfVersion},
	{5, (*client).delete},
	{6, (*client).deleteIfVersion},
	{12, (*client).move},
	{12, (*client).edit},
	{7, (*client).multiEdit},
}

// client is one client's generator: its random source, its sequence
// number and the version it last saw of each path (0: absent).
type client struct {
	id   int
	w    *workload
	rng  *rand.Rand
	seq  int
	seen [maxPaths]uint64
}

func newClient(id int, w *workload, seed int64) *client {
	return &client{id: id, w: w, rng: rand.New(rand.NewPCG(uint64(seed), uint64(id)))}
}

// next draws the next operation.
func (c *client) next() Input {
	n := c.rng.IntN(100)
	for _, w := range weights {
		if n < w.weight {
			return w.gen(c)
		}
		n -= w.weight
	}
	return c.read()
}

// observe remembers the version an answer showed of the paths it names.
func (c *client) observe(in Input, out Output) {
	switch {
	case in.Kind == KindGrep:
		// A Grep names no version.
	case in.Kind == KindCommit && out.ok():
		for _, f := range out.Files {
			if f.Path >= 0 && f.Path < maxPaths {
				c.seen[f.Path] = f.Version
				if f.Deleted {
					c.seen[f.Path] = 0
				}
			}
		}
	case in.Kind == KindCommit:
		if out.ActualVersion != nil && out.OperationIndex != nil && *out.OperationIndex < len(in.Ops) {
			c.seen[in.Ops[*out.OperationIndex].Path] = *out.ActualVersion
		}
	case out.ok() && in.Kind == KindDelete:
		c.seen[in.Path] = 0
	case out.ok() && in.Kind == KindMove:
		c.seen[in.Path], c.seen[in.Dest] = 0, out.Version
	case out.ok():
		c.seen[in.Path] = out.Version
	case out.is("NotFound", "NOT_FOUND") && in.Kind != KindMove:
		c.seen[in.Path] = 0
	case out.ActualVersion != nil:
		c.seen[in.Path] = *out.ActualVersion
	}
}

func (c *client) path() int { return c.rng.IntN(len(c.w.paths)) }

func (c *client) lastSeen(p int) *uint64 {
	v := c.seen[p]
	return &v
}

func (c *client) content() string {
	c.seq++
	tokens := make([]string, 1+c.rng.IntN(3))
	for i := range tokens {
		tokens[i] = c.letter()
	}
	return fmt.Sprintf("W%d.%d %s", c.id, c.seq, strings.Join(tokens, " "))
}

func (c *client) letter() string {
	i := c.rng.IntN(len(letters))
	return letters[i : i+1]
}

// replacement draws one letter replaced by another, now and then all of
// its occurrences.
func (c *client) replacement() Replacement {
	old := c.letter()
	repl := old
	for repl == old {
		repl = c.letter()
	}
	return Replacement{Old: old, New: repl, All: c.rng.IntN(4) == 0}
}

func (c *client) read() Input { return Input{Kind: KindRead, Path: c.path()} }

// grep draws a Grep for two adjacent tokens ("a b"), which some contents
// hold and some do not.
func (c *client) grep() Input {
	if !c.w.grep || c.w.pairs {
		return c.read()
	}
	return Input{Kind: KindGrep, Pattern: c.letter() + " " + c.letter()}
}

func (c *client) write() Input {
	return Input{Kind: KindWrite, Path: c.path(), Content: c.content()}
}

func (c *client) writeCreateOnly() Input {
	in := c.write()
	in.CreateOnly = true
	return in
}

func (c *client) writeIfVersion() Input {
	in := c.write()
	in.IfVersion = c.lastSeen(in.Path)
	return in
}

func (c *client) delete() Input { return Input{Kind: KindDelete, Path: c.path()} }

func (c *client) deleteIfVersion() Input {
	in := c.delete()
	in.IfVersion = c.lastSeen(in.Path)
	return in
}

// move draws a Move to the other path of the pair (or any other path),
// create-only, with the source's last seen version, or plain.
func (c *client) move() Input {
	src := c.path()
	dst := src ^ 1
	if !c.w.pairs {
		dst = (src + 1 + c.rng.IntN(len(c.w.paths)-1)) % len(c.w.paths)
	}
	in := Input{Kind: KindMove, Path: src, Dest: dst}
	switch c.rng.IntN(5) {
	case 0, 1:
		in.CreateOnly = true
	case 2, 3:
		in.IfVersion = c.lastSeen(src)
	}
	return in
}

func (c *client) edit() Input {
	in := Input{Kind: KindEdit, Path: c.path(), Edits: []Replacement{c.replacement()}}
	if c.rng.IntN(3) == 0 {
		in.IfVersion = c.lastSeen(in.Path)
	}
	return in
}

// multiEdit draws two replacements, of different letters but now and
// then of the same one (the server then refuses them as overlapping or
// not unique).
func (c *client) multiEdit() Input {
	first := c.replacement()
	second := c.replacement()
	for second.Old == first.Old && c.rng.IntN(8) != 0 {
		second = c.replacement()
	}
	in := Input{Kind: KindMultiEdit, Path: c.path(), Edits: []Replacement{first, second}}
	if c.rng.IntN(3) == 0 {
		in.IfVersion = c.lastSeen(in.Path)
	}
	return in
}

// commit draws a changeset of two or three operations (writes, edits,
// deletes, moves, some with if_version or create_only) on the paths of one
// pair (with pairs) or on any. Some fail on their own (a stale version, a
// missing file, an edit that matches nothing), and now and then one is
// made to fail: an edit of a letter no content holds, or an if_version on
// a file an earlier operation changed, so the all-or-nothing refusal is
// exercised after operations that would have applied.
func (c *client) commit() Input {
	if c.w.noCommits {
		return c.read()
	}
	paths := make([]int, 0, len(c.w.paths))
	if c.w.pairs {
		first := c.path() &^ 1
		paths = append(paths, first, first+1)
	} else {
		for p := range c.w.paths {
			paths = append(paths, p)
		}
	}
	pick := func() int { return paths[c.rng.IntN(len(paths))] }
	changed := map[int]bool{}
	// ifVersion is the last seen version of p, when no earlier operation
	// changed it (and rarely even then: INVALID_ARGUMENT).
	ifVersion := func(p int) *uint64 {
		if changed[p] && c.rng.IntN(6) != 0 {
			return nil
		}
		return c.lastSeen(p)
	}
	n := 2 + c.rng.IntN(2)
	in := Input{Kind: KindCommit}
	for i := range n {
		var op Input
		p := pick()
		switch k := c.rng.IntN(100); {
		case k < 30:
			op = Input{Kind: KindWrite, Path: p, Content: c.content()}
			switch c.rng.IntN(4) {
			case 0:
				op.CreateOnly = true
			case 1:
				op.IfVersion = ifVersion(p)
			}
		case k < 55:
			op = Input{Kind: KindEdit, Path: p, Edits: []Replacement{c.replacement()}}
			if i == n-1 && c.rng.IntN(8) == 0 {
				op.Edits[0].Old = "x"
			}
			if c.rng.IntN(4) == 0 {
				op.IfVersion = ifVersion(p)
			}
		case k < 65:
			op = Input{Kind: KindMultiEdit, Path: p, Edits: []Replacement{c.replacement(), c.replacement()}}
			if c.rng.IntN(4) == 0 {
				op.IfVersion = ifVersion(p)
			}
		case k < 80:
			op = Input{Kind: KindDelete, Path: p}
			if c.rng.IntN(3) == 0 {
				op.IfVersion = ifVersion(p)
			}
		default:
			dst := p
			for dst == p {
				dst = pick()
			}
			op = Input{Kind: KindMove, Path: p, Dest: dst}
			switch c.rng.IntN(5) {
			case 0, 1:
				op.CreateOnly = true
			case 2, 3:
				op.IfVersion = ifVersion(p)
			}
			changed[dst] = true
		}
		changed[p] = true
		in.Ops = append(in.Ops, op)
	}
	in.Path = in.Ops[0].Path
	return in
}
