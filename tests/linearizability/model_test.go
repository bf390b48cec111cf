package main

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// h builds histories for the model's tests: each operation is called at
// call and returns at ret (ret < 0: its outcome is unknown, it never
// returned).
type h []porcupine.Operation

func (hs h) op(client int, call, ret int64, in Input, out Output) h {
	if ret < 0 {
		ret, out = 1<<40, Output{Unknown: true, Code: "Unavailable"}
	}
	return append(hs, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

func v(n uint64) *uint64 { return &n }

func ok(version uint64) Output { return Output{Code: "OK", Version: version} }

func created(version uint64) Output { return Output{Code: "OK", Version: version, Created: true} }

func got(content string, version uint64) Output {
	return Output{Code: "OK", Content: content, Version: version}
}

var (
	notFound      = Output{Code: "NotFound", Reason: "NOT_FOUND"}
	alreadyExists = Output{Code: "AlreadyExists", Reason: "CONFLICT"}
)

func conflict(found uint64) Output {
	return Output{Code: "Aborted", Reason: "CONFLICT", ActualVersion: &found}
}

func refused(message string, index *int) Output {
	return Output{Code: "InvalidArgument", Reason: "INVALID_PARAM", Message: message, EditIndex: index}
}

func wr(p int, content string) Input { return Input{Kind: KindWrite, Path: p, Content: content} }
func rd(p int) Input                 { return Input{Kind: KindRead, Path: p} }
func del(p int, ifVersion *uint64) Input {
	return Input{Kind: KindDelete, Path: p, IfVersion: ifVersion}
}
func mv(from, to int) Input { return Input{Kind: KindMove, Path: from, Dest: to} }

var testPaths = []string{"/p0", "/p1", "/p2", "/p3"}

func checkHistory(t *testing.T, name string, ops h, want bool) {
	t.Helper()
	res := porcupine.CheckOperationsTimeout(newModel(testPaths, false), ops, 0)
	if (res == porcupine.Ok) != want {
		t.Errorf("%s: checker says %s, want linearizable=%t", name, res, want)
	}
}

func TestSequentialMixIsLinearizable(t *testing.T) {
	ops := h{}.
		op(0, 0, 1, wr(0, "W0.1 a b"), created(10)).
		op(0, 2, 3, rd(0), got("W0.1 a b", 10)).
		op(0, 4, 5, Input{Kind: KindEdit, Path: 0, Edits: []Replacement{{Old: "a", New: "c"}}}, Output{Code: "OK", Version: 11, Replacements: 1}).
		op(0, 6, 7, rd(0), got("W0.1 c b", 11)).
		op(0, 8, 9, Input{Kind: KindWrite, Path: 0, Content: "x", IfVersion: v(10)}, conflict(11)).
		op(0, 10, 11, Input{Kind: KindMove, Path: 0, Dest: 1, IfVersion: v(11)}, ok(12)).
		op(0, 12, 13, rd(0), notFound).
		op(0, 14, 15, rd(1), got("W0.1 c b", 12)).
		op(0, 16, 17, del(1, v(12)), Output{Code: "OK"}).
		op(0, 18, 19, del(1, v(12)), notFound).
		op(0, 20, 21, Input{Kind: KindWrite, Path: 1, Content: "W0.2 a", IfVersion: v(0)}, created(13)).
		op(0, 22, 23, Input{Kind: KindWrite, Path: 1, Content: "W0.3 a", CreateOnly: true}, alreadyExists)
	checkHistory(t, "sequential mix", ops, true)
}

func TestAnomaliesAreIllegal(t *testing.T) {
	base := h{}.op(0, 0, 1, wr(0, "A"), created(5))
	for _, c := range []struct {
		name string
		ops  h
	}{
		{"an acknowledged write lost", base.op(1, 2, 3, rd(0), notFound)},
		{"two deletes of one version both succeed", base.
			op(1, 2, 3, del(0, v(5)), Output{Code: "OK"}).
			op(2, 4, 5, del(0, v(5)), Output{Code: "OK"})},
		{"a version that does not grow across a delete", base.
			op(1, 2, 3, del(0, nil), Output{Code: "OK"}).
			op(1, 4, 5, wr(0, "B"), created(4))},
		{"a read pairing content with another write's version", base.
			op(1, 2, 3, wr(0, "B"), ok(6)).
			op(2, 4, 5, rd(0), got("A", 6))},
		{"a refused move that erased its destination", base.
			op(1, 2, 3, wr(1, "B"), created(6)).
			op(1, 4, 5, Input{Kind: KindMove, Path: 0, Dest: 1, IfVersion: v(4)}, conflict(5)).
			op(1, 6, 7, rd(1), notFound)},
		{"a create_only write over a file", base.
			op(1, 2, 3, Input{Kind: KindWrite, Path: 0, Content: "B", CreateOnly: true}, ok(6))},
		{"a conflict naming a version the file does not have", base.
			op(1, 2, 3, Input{Kind: KindWrite, Path: 0, Content: "B", IfVersion: v(4)}, conflict(7))},
		{"a moved file whose version does not exceed its destination's", base.
			op(1, 2, 3, wr(1, "B"), created(9)).
			op(1, 4, 5, mv(0, 1), ok(8))},
		{"an edit that matched nothing answered as done", base.
			op(1, 2, 3, Input{Kind: KindEdit, Path: 0, Edits: []Replacement{{Old: "z", New: "y"}}}, Output{Code: "OK", Version: 6, Replacements: 1})},
		{"a created flag on a replaced file", base.op(1, 2, 3, wr(0, "B"), created(6))},
	} {
		checkHistory(t, c.name, c.ops, false)
	}
}

func TestUnknownOutcomes(t *testing.T) {
	// A write that never answered may take effect after a later write...
	late := h{}.
		op(0, 0, -1, wr(0, "A"), Output{}).
		op(1, 10, 20, wr(0, "B"), created(5)).
		op(1, 30, 40, rd(0), got("A", 9))
	checkHistory(t, "an unknown write applied late", late, true)
	// ...or never; but never with a version below what the path had.
	checkHistory(t, "an unknown write not applied", h{}.
		op(0, 0, -1, wr(0, "A"), Output{}).
		op(1, 30, 40, rd(0), notFound), true)
	checkHistory(t, "an unknown write with a version below the floor", late[:2].
		op(1, 30, 40, rd(0), got("A", 4)), false)
	// An unknown Move either moved the file (the source is gone, the
	// destination has a fresh version) or did not.
	checkHistory(t, "an unknown move", h{}.
		op(0, 0, 1, wr(0, "A"), created(5)).
		op(0, 2, -1, mv(0, 1), Output{}).
		op(1, 10, 11, rd(1), got("A", 7)).
		op(1, 12, 13, rd(0), notFound), true)
}

func TestConcurrentWritesEitherOrder(t *testing.T) {
	ops := h{}.
		op(0, 0, 10, wr(0, "A"), created(5)).
		op(1, 1, 11, wr(0, "B"), ok(6)).
		op(2, 12, 13, rd(0), got("B", 6))
	checkHistory(t, "concurrent writes", ops, true)
	checkHistory(t, "concurrent writes, stale read", ops[:2].op(2, 12, 13, rd(0), got("A", 5)), false)
}

func TestDeleteIfVersionOfMissingFile(t *testing.T) {
	for _, out := range []Output{notFound, conflict(0)} {
		checkHistory(t, "delete if_version of a missing file: "+out.Code,
			h{}.op(0, 0, 1, del(0, v(3)), out), true)
	}
}

func TestEditRefusals(t *testing.T) {
	index := func(i int) *int { return &i }
	edit := func(edits ...Replacement) Input { return Input{Kind: KindEdit, Path: 0, Edits: edits} }
	multi := func(edits ...Replacement) Input { return Input{Kind: KindMultiEdit, Path: 0, Edits: edits} }
	base := h{}.op(0, 0, 1, wr(0, "W a b a"), created(5))
	for _, c := range []struct {
		name string
		in   Input
		out  Output
	}{
		{"no match", edit(Replacement{Old: "c", New: "a"}), refused(`old_string not found in file: "c"`, nil)},
		{"several matches", edit(Replacement{Old: "a", New: "c"}), refused("old_string matches 2 times in file. It must be unique.", nil)},
		{"replace all", edit(Replacement{Old: "a", New: "c", All: true}), Output{Code: "OK", Version: 6, Replacements: 2}},
		{"swap", multi(Replacement{Old: "b", New: "a"}, Replacement{Old: "a", New: "b", All: true}), Output{Code: "OK", Version: 6, Replacements: 3}},
		{"second edit no match", multi(Replacement{Old: "b", New: "a"}, Replacement{Old: "c", New: "a"}), refused(`edit 1 failed: old_string not found in file: "c"`, index(1))},
		{"overlap", multi(Replacement{Old: "b", New: "a"}, Replacement{Old: "b", New: "c"}), refused("edit 1 failed: edit 1 overlaps edit 0 in the original text; merge them into one edit", index(1))},
	} {
		checkHistory(t, c.name, base.op(0, 2, 3, c.in, c.out), true)
	}
	checkHistory(t, "wrong edit index", base.op(0, 2, 3,
		multi(Replacement{Old: "b", New: "a"}, Replacement{Old: "c", New: "a"}),
		refused(`edit 0 failed: old_string not found in file: "c"`, index(0))), false)
}

func TestApplyEditsMirrorsTheServer(t *testing.T) {
	for _, c := range []struct {
		text  string
		edits []Replacement
		multi bool
		want  string
		n     uint64
		why   *editRefusal
	}{
		{"a b a", []Replacement{{Old: "b", New: "c"}}, false, "a c a", 1, nil},
		{"a b a", []Replacement{{Old: "a", New: "c"}}, false, "", 0, &editRefusal{-1, refusedSeveral}},
		{"a b a", []Replacement{{Old: "a", New: "c", All: true}}, false, "c b c", 2, nil},
		{"a b", []Replacement{{Old: "a", New: "b"}, {Old: "b", New: "a"}}, true, "b a", 2, nil},
		{"a b", []Replacement{{Old: "a", New: "a"}}, true, "", 0, &editRefusal{0, refusedSame}},
		{"a b", []Replacement{{Old: "a", New: "c"}, {Old: "a", New: "b"}}, true, "", 0, &editRefusal{1, refusedOverlap}},
	} {
		got, n, why := applyEdits(c.text, c.edits, c.multi)
		if got != c.want || n != c.n || (why == nil) != (c.why == nil) || (why != nil && *why != *c.why) {
			t.Errorf("applyEdits(%q, %v) = %q, %d, %v; want %q, %d, %v", c.text, c.edits, got, n, why, c.want, c.n, c.why)
		}
	}
}

func TestPartitionPairsKeepsMovesInTheirPair(t *testing.T) {
	ops := h{}.
		op(0, 0, 1, wr(0, "A"), created(1)).
		op(0, 2, 3, mv(0, 1), ok(2)).
		op(1, 0, 1, wr(3, "B"), created(3))
	parts := partitionPairs(ops)
	if len(parts) != 2 || len(parts[0]) != 2 || len(parts[1]) != 1 {
		t.Fatalf("partitions: %d (%v)", len(parts), parts)
	}
}

// Commit helpers: a changeset's operations, its success (one entry per
// file touched, in path order) and the refusal of its operation i.
func cs(ops ...Input) Input { return Input{Kind: KindCommit, Path: ops[0].Path, Ops: ops} }

func committed(files ...CommittedFile) Output { return Output{Code: "OK", Files: files} }

func put(p int, version uint64, content string) CommittedFile {
	return CommittedFile{Path: p, Version: version, Size: uint64(len(content))}
}

func gone(p int, version uint64) CommittedFile {
	return CommittedFile{Path: p, Version: version, Deleted: true}
}

func atOp(i int, out Output) Output {
	out.OperationIndex = &i
	return out
}

func edt(p int, old, repl string) Input {
	return Input{Kind: KindEdit, Path: p, Edits: []Replacement{{Old: old, New: repl}}}
}

var noMatch = func(s string) Output { return refused(`old_string not found in file: "`+s+`"`, nil) }

func TestCommitAppliesInOrder(t *testing.T) {
	base := h{}.
		op(0, 0, 1, wr(0, "A a"), created(5)).
		op(0, 2, 3, wr(1, "B b"), created(6))
	// A write then an edit of the same file edits the written text; a
	// move carries the content; every touched file gets a new version.
	ops := base.
		op(1, 4, 5, cs(wr(2, "C a"), edt(2, "a", "c"), mv(0, 3)),
			committed(gone(0, 0), put(2, 7, "C c"), put(3, 8, "A a"))).
		op(2, 6, 7, rd(2), got("C c", 7)).
		op(2, 8, 9, rd(3), got("A a", 8)).
		op(2, 10, 11, rd(0), notFound).
		op(2, 12, 13, rd(1), got("B b", 6))
	checkHistory(t, "a committed changeset", ops, true)
	// Deleted then re-created; if_version checked against the state
	// before; a created-then-deleted file answered deleted with version 0.
	checkHistory(t, "delete, re-create, create and delete", base.
		op(1, 4, 5, cs(del(0, v(5)), Input{Kind: KindWrite, Path: 0, Content: "D", CreateOnly: true}, wr(2, "E"), del(2, nil)),
			committed(put(0, 9, "D"), gone(2, 0))).
		op(2, 6, 7, rd(0), got("D", 9)).
		op(2, 8, 9, rd(2), notFound), true)
	checkHistory(t, "a new version at or below the floor", base.
		op(1, 4, 5, cs(edt(0, "a", "b"), edt(1, "b", "a")), committed(put(0, 9, "A b"), put(1, 6, "B a"))), false)
	checkHistory(t, "an answer missing a touched file", base.
		op(1, 4, 5, cs(edt(0, "a", "b"), edt(1, "b", "a")), committed(put(0, 9, "A b"))), false)
	checkHistory(t, "a committed changeset whose edit is not seen", base.
		op(1, 4, 5, cs(wr(2, "C"), edt(0, "a", "c")), committed(put(0, 9, "A c"), put(2, 10, "C"))).
		op(2, 6, 7, rd(0), got("A a", 5)), false)
}

func TestCommitRefusalChangesNothing(t *testing.T) {
	base := h{}.
		op(0, 0, 1, wr(0, "A a"), created(5)).
		op(0, 2, 3, wr(1, "B b"), created(6))
	// The last operation fails: the whole changeset is refused with its
	// error, and the operations before it left nothing.
	failing := cs(wr(0, "X"), mv(1, 2), edt(0, "z", "y"))
	refusal := atOp(2, noMatch("z"))
	whole := base.
		op(1, 4, 5, failing, refusal).
		op(2, 6, 7, rd(0), got("A a", 5)).
		op(2, 8, 9, rd(1), got("B b", 6)).
		op(2, 10, 11, rd(2), notFound)
	checkHistory(t, "a refused changeset, nothing applied", whole, true)
	checkHistory(t, "a refused changeset whose first write stayed", base.
		op(1, 4, 5, failing, refusal).
		op(2, 6, 7, rd(0), got("X", 7)), false)
	checkHistory(t, "a refused changeset whose move stayed", base.
		op(1, 4, 5, failing, refusal).
		op(2, 6, 7, rd(1), notFound), false)
	checkHistory(t, "the refusal naming another operation", base.
		op(1, 4, 5, failing, atOp(0, noMatch("z"))), false)
	checkHistory(t, "a refusal when every operation applies", base.
		op(1, 4, 5, cs(wr(0, "X"), edt(1, "b", "c")), atOp(1, noMatch("b"))), false)
	// The first failing operation is the answer: a stale if_version
	// (naming the version found), create_only, a missing file, and an
	// if_version on a file an earlier operation changed.
	for _, c := range []struct {
		name string
		in   Input
		out  Output
	}{
		{"stale if_version", cs(wr(2, "C"), del(0, v(4)), del(1, v(1))), atOp(1, conflict(5))},
		{"create_only", cs(wr(2, "C"), Input{Kind: KindMove, Path: 0, Dest: 1, CreateOnly: true}), atOp(1, alreadyExists)},
		{"missing source", cs(mv(0, 2), mv(0, 3)), atOp(1, notFound)},
		{"if_version after a change", cs(wr(0, "C"), del(0, v(5))), atOp(1, refused("if_version 5 on /lin/p0, which an earlier operation of the changeset changed", nil))},
	} {
		checkHistory(t, "refused: "+c.name, base.op(1, 4, 5, c.in, c.out).op(2, 6, 7, rd(2), notFound), true)
	}
}

func TestConcurrentCommitsSerialize(t *testing.T) {
	base := h{}.
		op(0, 0, 1, wr(0, "A a"), created(5)).
		op(0, 2, 3, wr(1, "B a"), created(6))
	// Two concurrent changesets each edit both files: either order, but
	// not one's edit of p0 with the other's of p1.
	c1 := cs(edt(0, "a", "b"), edt(1, "a", "b"))
	c2 := cs(edt(0, "a", "c"), edt(1, "a", "c"))
	both := base.
		op(1, 4, 10, c1, committed(put(0, 7, "A b"), put(1, 8, "B b"))).
		op(2, 5, 11, c2, atOp(0, noMatch("a")))
	checkHistory(t, "one wins, the other finds its edit gone", both.
		op(3, 12, 13, rd(0), got("A b", 7)).
		op(3, 14, 15, rd(1), got("B b", 8)), true)
	// A torn history: the first changeset's p0 and the second's p1.
	torn := base.
		op(1, 4, 10, c1, committed(put(0, 7, "A b"), put(1, 8, "B b"))).
		op(2, 5, 11, c2, committed(put(0, 9, "A c"), put(1, 10, "B c")))
	checkHistory(t, "both answered OK, each edit after the other's", torn, false)
	// A half-applied changeset: a reader sees its move's destination but
	// still the source, or one file new and the other old.
	half := base.op(1, 4, 10, cs(mv(0, 2), wr(1, "C")), committed(gone(0, 0), put(1, 9, "C"), put(2, 8, "A a")))
	checkHistory(t, "a reader sees the whole changeset", half.
		op(2, 12, 13, rd(2), got("A a", 8)).
		op(2, 14, 15, rd(1), got("C", 9)).
		op(2, 16, 17, rd(0), notFound), true)
	checkHistory(t, "a reader sees a half-applied changeset", half.
		op(2, 5, 6, rd(2), got("A a", 8)).
		op(2, 7, 8, rd(1), got("B a", 6)), false)
	checkHistory(t, "a reader sees a moved file at both ends", half.
		op(2, 5, 6, rd(2), got("A a", 8)).
		op(2, 7, 8, rd(0), got("A a", 5)), false)
}

func TestUnknownCommit(t *testing.T) {
	base := h{}.op(0, 0, 1, wr(0, "A a"), created(5))
	c := cs(edt(0, "a", "b"), wr(1, "B"))
	// An unknown changeset applies whole or not at all.
	checkHistory(t, "an unknown changeset applied", base.
		op(1, 2, -1, c, Output{}).
		op(2, 10, 11, rd(0), got("A b", 9)).
		op(2, 12, 13, rd(1), got("B", 9)), true)
	checkHistory(t, "an unknown changeset not applied", base.
		op(1, 2, -1, c, Output{}).
		op(2, 10, 11, rd(0), got("A a", 5)).
		op(2, 12, 13, rd(1), notFound), true)
	checkHistory(t, "an unknown changeset applied in half", base.
		op(1, 2, -1, c, Output{}).
		op(2, 10, 11, rd(1), got("B", 9)).
		op(2, 12, 13, rd(0), got("A a", 5)), false)
}

func TestContendedCommitChangesNothing(t *testing.T) {
	base := h{}.op(0, 0, 1, wr(0, "A a"), created(5))
	c := cs(edt(0, "a", "b"), wr(1, "B"))
	lost := Output{Code: "Unavailable", Reason: "INTERNAL_ERROR", Contended: true}
	checkHistory(t, "a contended changeset, nothing applied", base.
		op(1, 2, 3, c, lost).
		op(2, 10, 11, rd(0), got("A a", 5)).
		op(2, 12, 13, rd(1), notFound), true)
	checkHistory(t, "a contended changeset that applied", base.
		op(1, 2, 3, c, lost).
		op(2, 10, 11, rd(0), got("A b", 9)).
		op(2, 12, 13, rd(1), got("B", 9)), false)
	checkHistory(t, "a single call answering as a contended changeset", base.
		op(1, 2, 3, wr(1, "B"), lost), false)
}

func TestHistoryBefore(t *testing.T) {
	h := &History{records: []Record{
		{Client: 0, Input: wr(0, "A a"), Output: created(5), Call: 0, Return: 10},
		{Client: 1, Input: rd(0), Output: got("A a", 5), Call: 5, Return: 30},
		{Client: 0, Input: wr(0, "B"), Output: ok(7), Call: 25, Return: 40},
	}}
	cut := h.before(20)
	if len(cut.records) != 2 {
		t.Fatalf("prefix at 20 has %d calls, want 2", len(cut.records))
	}
	if r := cut.records[0]; r.Output.Unknown || r.Return != 10 {
		t.Errorf("a call answered before the cut changed: %+v", r)
	}
	if r := cut.records[1]; !r.Output.Unknown || r.Return != 20 {
		t.Errorf("a call unanswered at the cut is not unknown: %+v", r)
	}
	if !h.records[1].Output.ok() {
		t.Errorf("the cut changed the history it was cut from")
	}
}

func gr(pattern string) Input { return Input{Kind: KindGrep, Pattern: pattern} }

func hits(pairs ...any) Output {
	out := Output{Code: "OK", Hits: []GrepHit{}}
	for i := 0; i < len(pairs); i += 2 {
		out.Hits = append(out.Hits, GrepHit{Path: pairs[i].(int), Line: pairs[i+1].(string)})
	}
	return out
}

// A Grep must see every file as of one instant: while one client moves a
// matching file from p0 to p1, a Grep may find it at either path, never at
// both and never at neither.
func TestGrepSeesOneInstantOfEveryFile(t *testing.T) {
	base := h{}.
		op(0, 0, 1, wr(0, "W0.1 a b"), created(1)).
		op(0, 2, 3, wr(2, "W0.2 c c"), created(2)).
		op(0, 4, 9, mv(0, 1), ok(3))
	for _, c := range []struct {
		name string
		out  Output
		want bool
	}{
		{"before the move", hits(0, "W0.1 a b"), true},
		{"after the move", hits(1, "W0.1 a b"), true},
		{"at both paths", hits(0, "W0.1 a b", 1, "W0.1 a b"), false},
		{"at neither", hits(), false},
		{"another line", hits(0, "W0.1 a b c"), false},
		{"a file without the pattern", hits(0, "W0.1 a b", 2, "W0.2 c c"), false},
		{"a path outside the workload", hits(-1, "W0.1 a b"), false},
	} {
		checkHistory(t, c.name, base.op(1, 5, 8, gr("a b"), c.out), c.want)
	}
	// NOT_FOUND (no directory) only while no file exists.
	checkHistory(t, "not found with no file", h{}.
		op(1, 0, 1, gr("a b"), notFound).
		op(0, 2, 3, wr(0, "W0.1 c"), created(1)), true)
	checkHistory(t, "not found with a file", h{}.
		op(0, 0, 1, wr(0, "W0.1 c"), created(1)).
		op(1, 2, 3, gr("a b"), notFound), false)
	// A Grep that ended before the move began cannot see its effect.
	checkHistory(t, "before a later move", h{}.
		op(0, 0, 1, wr(0, "W0.1 a b"), created(1)).
		op(1, 2, 3, gr("a b"), hits(1, "W0.1 a b")).
		op(0, 4, 5, mv(0, 1), ok(3)), false)
	// Two writes in order: a Grep cannot see the second without the first.
	checkHistory(t, "the second write without the first", h{}.
		op(0, 0, 1, wr(0, "W0.1 a a"), created(1)).
		op(0, 2, 3, wr(0, "W0.2 a b"), ok(2)).
		op(0, 4, 9, wr(1, "W0.3 a b"), created(3)).
		op(1, 5, 8, gr("a b"), hits(1, "W0.3 a b")), false)
	checkHistory(t, "both writes", h{}.
		op(0, 0, 1, wr(0, "W0.1 a a"), created(1)).
		op(0, 2, 3, wr(0, "W0.2 a b"), ok(2)).
		op(0, 4, 9, wr(1, "W0.3 a b"), created(3)).
		op(1, 5, 8, gr("a b"), hits(0, "W0.2 a b", 1, "W0.3 a b")), true)
}
