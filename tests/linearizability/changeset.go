package main

import (
	"slices"
	"strings"
)

// The model of a Commit (docs/changesets.md): its operations run in order
// over a copy of the state, each seeing what the ones before it did. The
// first that fails is the answer (naming it in operation_index) and
// nothing changes; else every file touched ends as the operations left it,
// a present one with one new version above its floor, a deleted one absent
// with its floor kept.

// staged is a file as a changeset's operations have left it so far.
type staged struct {
	Present bool
	Content string
	// Changed: an operation of the changeset changed it (its version is
	// then unknown to the changeset: if_version on it is refused).
	Changed bool
	Touched bool
}

// stage is a changeset halfway: base is the state before it, with what
// its checks learned of versions (an if_version that matched); files are
// the files as its operations left them.
type stage struct {
	base  state
	files [maxPaths]staged
}

// changeset checks one Commit's answer against every way its operations
// can go from s (a version check of a file whose version no answer
// revealed may go either way).
type changeset struct {
	before state
	in     Input
	out    Output
	after  []state
}

func commit(s state, in Input, out Output) []state {
	if out.Contended {
		// It lost its races: nothing applied, whatever the state.
		return []state{s}
	}
	c := &changeset{before: s, in: in, out: out}
	st := stage{base: s}
	for p, f := range s {
		st.files[p] = staged{Present: f.Present, Content: f.Content}
	}
	c.run(st, 0)
	return c.after
}

// allow adds a state the answer allows.
func (c *changeset) allow(s state) {
	if !slices.Contains(c.after, s) {
		c.after = append(c.after, s)
	}
}

// refuse is operation i failing: an unknown answer leaves the state as it
// was; a known one must be a refusal naming operation i that ok accepts,
// and leaves the state ok returns (the base, with what the refusal
// revealed).
func (c *changeset) refuse(st stage, i int, ok func(Output, state) (state, bool)) {
	if c.out.Unknown {
		c.allow(c.before)
		return
	}
	if c.out.OperationIndex == nil || *c.out.OperationIndex != i {
		return
	}
	if s, good := ok(c.out, st.base); good {
		c.allow(s)
	}
}

// refusedAs accepts a refusal with this code and reason.
func refusedAs(code, reason string) func(Output, state) (state, bool) {
	return func(out Output, s state) (state, bool) { return s, out.is(code, reason) }
}

// ifVersion checks operation i's if_version on path p as the server
// does, then goes on with next when it holds: refused as INVALID_ARGUMENT
// on a file an earlier operation changed; else compared with the file's
// version before the changeset (0: absent). notFound allows NOT_FOUND as
// well as the conflict "found 0" for a missing file (Edit, Delete, Move:
// their single calls check existence first).
func (c *changeset) ifVersion(st stage, i, p int, ifVersion *uint64, notFound bool, next func(stage)) {
	if ifVersion == nil {
		next(st)
		return
	}
	if st.files[p].Changed {
		c.refuse(st, i, func(out Output, s state) (state, bool) {
			return s, out.is("InvalidArgument", "INVALID_PARAM") && strings.Contains(out.Message, "earlier operation")
		})
		return
	}
	b := st.base[p]
	m := b.versionMatch(*ifVersion)
	if m != matchYes {
		c.refuse(st, i, func(out Output, s state) (state, bool) {
			if notFound && !b.Present && out.is("NotFound", "NOT_FOUND") {
				return s, true
			}
			f, ok := b.conflict(out, *ifVersion)
			s[p] = f
			return s, ok
		})
	}
	if m != matchNo {
		if b.Present {
			b.Version, b.Floor = *ifVersion, max(b.Floor, *ifVersion)
			st.base[p] = b
		}
		next(st)
	}
}

// set makes the staged content of p (absent: deleted).
func (st *stage) set(p int, present bool, content string) {
	st.files[p] = staged{Present: present, Content: content, Changed: true, Touched: true}
}

// run applies operations i onwards to st.
func (c *changeset) run(st stage, i int) {
	if i == len(c.in.Ops) {
		c.commit(st)
		return
	}
	op := c.in.Ops[i]
	p := op.Path
	st.files[p].Touched = true
	next := func(st stage) { c.run(st, i+1) }
	switch op.Kind {
	case KindWrite:
		if op.CreateOnly && st.files[p].Present {
			c.refuse(st, i, refusedAs("AlreadyExists", "CONFLICT"))
			return
		}
		c.ifVersion(st, i, p, op.IfVersion, false, func(st stage) {
			st.set(p, true, op.Content)
			next(st)
		})
	case KindDelete:
		c.ifVersion(st, i, p, op.IfVersion, true, func(st stage) {
			if !st.files[p].Present {
				c.refuse(st, i, refusedAs("NotFound", "NOT_FOUND"))
				return
			}
			st.set(p, false, "")
			next(st)
		})
	case KindMove:
		st.files[op.Dest].Touched = true
		c.ifVersion(st, i, p, op.IfVersion, true, func(st stage) {
			src := st.files[p]
			switch {
			case !src.Present:
				c.refuse(st, i, refusedAs("NotFound", "NOT_FOUND"))
			case op.CreateOnly && st.files[op.Dest].Present:
				c.refuse(st, i, refusedAs("AlreadyExists", "CONFLICT"))
			default:
				st.set(p, false, "")
				st.set(op.Dest, true, src.Content)
				next(st)
			}
		})
	case KindEdit, KindMultiEdit:
		c.ifVersion(st, i, p, op.IfVersion, true, func(st stage) {
			if !st.files[p].Present {
				c.refuse(st, i, refusedAs("NotFound", "NOT_FOUND"))
				return
			}
			multi := op.Kind == KindMultiEdit
			text, _, why := applyEdits(st.files[p].Content, op.Edits, multi)
			if why != nil {
				c.refuse(st, i, func(out Output, s state) (state, bool) {
					got := refusalOf(out, multi)
					return s, out.is("InvalidArgument", "INVALID_PARAM") && got != nil && *got == *why
				})
				return
			}
			st.set(p, true, text)
			next(st)
		})
	}
}

// commit is every operation applied: each file touched takes its staged
// state, a present one with a new version above its floor (the answer's;
// unknown: one no answer revealed yet). The answer lists exactly the files
// touched, in path order.
func (c *changeset) commit(st stage) {
	after := st.base
	var touched []int
	for p, f := range st.files {
		if f.Touched {
			touched = append(touched, p)
		}
	}
	if !c.out.Unknown && (!c.out.ok() || len(c.out.Files) != len(touched)) {
		return
	}
	for k, p := range touched {
		b, f := st.base[p], st.files[p]
		var got CommittedFile
		if !c.out.Unknown {
			got = c.out.Files[k]
			if got.Path != p || got.Deleted == f.Present {
				return
			}
		}
		switch {
		case !f.Present:
			// Deleted (its deletion's version, above the floor, or 0 on
			// a tier that keeps none), or created and deleted again
			// (nothing to delete: 0).
			if got.Version != 0 && (!b.Present || got.Version <= b.Floor) {
				return
			}
			if got.Size != 0 {
				return
			}
			after[p] = file{Floor: b.Floor}
		default:
			if !c.out.Unknown && (got.Version <= b.Floor || got.Size != uint64(len(f.Content))) {
				return
			}
			after[p] = written(f.Content, got.Version, b.Floor)
		}
	}
	if c.out.Unknown {
		c.allow(c.before)
	}
	c.allow(after)
}
