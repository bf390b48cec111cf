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
	{28, (*client).read},
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
