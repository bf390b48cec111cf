package main

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// maxPaths is how many paths a workload may use (the model's state is a
// fixed array, so states compare with ==).
const maxPaths = 4

// file is the model's view of one path: absent, or a content and a version.
// Version 0 on a present file means no answer has revealed its version yet
// (it came from an operation whose outcome is unknown); it is then known to
// be above Floor.
type file struct {
	Present bool
	Content string
	Version uint64
	// Floor is the largest version the path is known to have had, deleted
	// and moved-away ones included: a new version must exceed it, since
	// versions only grow (docs/contract.md § Backend protocol).
	Floor uint64
}

// state is the model's view of every path.
type state [maxPaths]file

// match says whether a file's version equals an if_version: yes, no, or
// maybe (the file's version is not known).
type match int

const (
	matchNo match = iota
	matchYes
	matchMaybe
)

// versionMatch compares if_version v with the file (0: it must not exist).
func (f file) versionMatch(v uint64) match {
	switch {
	case !f.Present:
		if v == 0 {
			return matchYes
		}
		return matchNo
	case v == 0:
		return matchNo
	case f.Version != 0:
		if v == f.Version {
			return matchYes
		}
		return matchNo
	case v > f.Floor:
		return matchMaybe
	}
	return matchNo
}

// learn records that the file's current version is v (an answer revealed
// it); false when v cannot be its version.
func (f file) learn(v uint64) (file, bool) {
	switch {
	case !f.Present:
		return f, v == 0
	case f.Version != 0:
		return f, v == f.Version
	case v <= f.Floor:
		return f, false
	}
	f.Version, f.Floor = v, v
	return f, true
}

// conflict checks a version-conflict answer (ABORTED / CONFLICT) against
// the file: it must name the version the file has (0: none), which differs
// from the if_version sent.
func (f file) conflict(out Output, ifVersion uint64) (file, bool) {
	if !out.is("Aborted", "CONFLICT") || out.ActualVersion == nil || *out.ActualVersion == ifVersion {
		return f, false
	}
	return f.learn(*out.ActualVersion)
}

// written is the file after a change that left content with version v
// (0: a version no answer revealed, above floor).
func written(content string, v, floor uint64) file {
	return file{Present: true, Content: content, Version: v, Floor: max(floor, v)}
}

// precondition checks an if_version against file f. It returns the file
// as it must be for the operation to go on (its version learned) and true,
// or the state the answer leaves when the operation is refused: refused is
// then true and ok says whether the answer was allowed.
func precondition(f file, ifVersion *uint64, out Output) (next file, refused, ok bool) {
	if ifVersion == nil {
		return f, false, true
	}
	m := f.versionMatch(*ifVersion)
	if m == matchNo || (m == matchMaybe && !out.Unknown && out.Code == "Aborted") {
		if out.Unknown {
			return f, true, true
		}
		f, ok := f.conflict(out, *ifVersion)
		return f, true, ok
	}
	// The version matched: it is if_version.
	f.Version, f.Floor = *ifVersion, max(f.Floor, *ifVersion)
	if !f.Present {
		f.Version = 0
	}
	return f, false, true
}

// step is the sequential specification: every state the system may be in
// after the operation, given its answer. An unknown answer allows both the
// state before and the operation's effect (with a version no answer
// revealed); a known answer allows exactly the state it implies, or none
// when the contract does not allow that answer in this state.
func step(s state, in Input, out Output) []state {
	switch in.Kind {
	case KindRead:
		return read(s, in, out)
	case KindWrite:
		return write(s, in, out)
	case KindDelete:
		return remove(s, in, out)
	case KindMove:
		return move(s, in, out)
	case KindEdit, KindMultiEdit:
		return edit(s, in, out)
	case KindCommit:
		return commit(s, in, out)
	case KindGrep:
		return grepped(s, in, out)
	}
	return nil
}

// grepped checks a Grep's answer: exactly the present files whose content
// holds the pattern, each once with its whole content as the line (a
// content is one line). It changes nothing. With no file present it may
// also be NOT_FOUND: on State the workload's directory exists only while
// it holds a file.
func grepped(s state, in Input, out Output) []state {
	if out.Unknown {
		return []state{s}
	}
	if out.is("NotFound", "NOT_FOUND") && !slices.ContainsFunc(s[:], func(f file) bool { return f.Present }) {
		return []state{s}
	}
	if !out.ok() {
		return nil
	}
	lines := make(map[int]string, len(out.Hits))
	for _, hit := range out.Hits {
		if _, twice := lines[hit.Path]; twice || hit.Path < 0 || hit.Path >= maxPaths {
			return nil
		}
		lines[hit.Path] = hit.Line
	}
	for p, f := range s {
		line, hit := lines[p]
		want := f.Present && strings.Contains(f.Content, in.Pattern)
		if hit != want || (hit && line != f.Content) {
			return nil
		}
	}
	return []state{s}
}

// outcomes returns the states an answer allows: unknown answers allow both
// the unchanged state and the effect; a known answer the effect if ok.
func outcomes(before, after state, out Output, ok bool) []state {
	switch {
	case out.Unknown:
		return []state{before, after}
	case ok:
		return []state{after}
	}
	return nil
}

// refusal returns the states a refusal allows: the state it leaves when
// the answer was that refusal (or unknown), none otherwise.
func refusal(before, after state, out Output, ok bool) []state {
	switch {
	case out.Unknown:
		return []state{before}
	case ok:
		return []state{after}
	}
	return nil
}

// newVersion checks a success's new version against the floor it must
// exceed; an unknown answer has no version (0).
func newVersion(out Output, floor uint64) (uint64, bool) {
	if out.Unknown {
		return 0, true
	}
	return out.Version, out.ok() && out.Version > floor
}

func read(s state, in Input, out Output) []state {
	if out.Unknown {
		return []state{s}
	}
	f := s[in.Path]
	if !f.Present {
		return refusal(s, s, out, out.is("NotFound", "NOT_FOUND"))
	}
	if !out.ok() || out.Content != f.Content {
		return nil
	}
	f, ok := f.learn(out.Version)
	if !ok {
		return nil
	}
	s[in.Path] = f
	return []state{s}
}

func write(s state, in Input, out Output) []state {
	f := s[in.Path]
	if in.CreateOnly && f.Present {
		return refusal(s, s, out, out.is("AlreadyExists", "CONFLICT"))
	}
	g, refused, ok := precondition(f, in.IfVersion, out)
	if refused {
		after := s
		after[in.Path] = g
		return refusal(s, after, out, ok)
	}
	v, ok := newVersion(out, g.Floor)
	ok = ok && (out.Unknown || out.Created == !f.Present)
	after := s
	after[in.Path] = written(in.Content, v, g.Floor)
	return outcomes(s, after, out, ok)
}

func remove(s state, in Input, out Output) []state {
	f := s[in.Path]
	if !f.Present {
		// Delete if_version of a missing file: NOT_FOUND, or the
		// conflict its if_version is (found 0).
		ok := out.is("NotFound", "NOT_FOUND")
		if !ok && in.IfVersion != nil {
			_, ok = f.conflict(out, *in.IfVersion)
		}
		return refusal(s, s, out, ok)
	}
	g, refused, ok := precondition(f, in.IfVersion, out)
	if refused {
		after := s
		after[in.Path] = g
		return refusal(s, after, out, ok)
	}
	after := s
	after[in.Path] = file{Floor: g.Floor}
	return outcomes(s, after, out, out.Unknown || out.ok())
}

func move(s state, in Input, out Output) []state {
	src, dst := s[in.Path], s[in.Dest]
	if !src.Present {
		return refusal(s, s, out, out.is("NotFound", "NOT_FOUND"))
	}
	g, refused, ok := precondition(src, in.IfVersion, out)
	if refused {
		after := s
		after[in.Path] = g
		return refusal(s, after, out, ok)
	}
	if in.CreateOnly && dst.Present {
		after := s
		after[in.Path] = g
		return refusal(s, after, out, out.is("AlreadyExists", "CONFLICT"))
	}
	floor := max(g.Floor, dst.Floor)
	v, ok := newVersion(out, floor)
	after := s
	after[in.Path] = file{Floor: g.Floor}
	after[in.Dest] = written(g.Content, v, floor)
	return outcomes(s, after, out, ok)
}

func edit(s state, in Input, out Output) []state {
	f := s[in.Path]
	if !f.Present {
		return refusal(s, s, out, out.is("NotFound", "NOT_FOUND"))
	}
	g, refused, ok := precondition(f, in.IfVersion, out)
	if refused {
		after := s
		after[in.Path] = g
		return refusal(s, after, out, ok)
	}
	multi := in.Kind == KindMultiEdit
	text, n, why := applyEdits(g.Content, in.Edits, multi)
	if why != nil {
		ok := out.is("InvalidArgument", "INVALID_PARAM")
		if ok {
			got := refusalOf(out, multi)
			ok = got != nil && *got == *why
		}
		after := s
		after[in.Path] = g
		return refusal(s, after, out, ok)
	}
	v, ok := newVersion(out, g.Floor)
	ok = ok && (out.Unknown || out.Replacements == n)
	after := s
	after[in.Path] = written(text, v, g.Floor)
	return outcomes(s, after, out, ok)
}

// newModel is the Porcupine model of a workload over paths. With pairs,
// Moves stay within pairs of paths (0↔1, 2↔3) and each pair is checked as
// its own partition; otherwise the whole history is one partition.
func newModel(paths []string, pairs bool) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{state{}} },
		Step: func(st, input, output any) []any {
			next := step(st.(state), input.(Input), output.(Output))
			out := make([]any, len(next))
			for i, n := range next {
				out[i] = n
			}
			return out
		},
		Hash: func(st any) uint64 { return st.(state).hash() },
		DescribeOperation: func(input, output any) string {
			return describe(paths, input.(Input), output.(Output))
		},
		DescribeState: func(st any) string { return describeState(paths, st.(state)) },
		DescribeOperationMetadata: func(server any) string {
			if server == nil {
				return ""
			}
			return fmt.Sprintf("server %v", server)
		},
	}
	if pairs {
		nm.Partition = partitionPairs
	}
	return nm.ToModel()
}

// hash is an FNV-1a hash of every field of every file.
func (s state) hash() uint64 {
	h := fnv.New64a()
	var b [17]byte
	for _, f := range s {
		if f.Present {
			b[0] = 1
		} else {
			b[0] = 0
		}
		binary.LittleEndian.PutUint64(b[1:], f.Version)
		binary.LittleEndian.PutUint64(b[9:], f.Floor)
		h.Write(b[:])
		h.Write([]byte(f.Content))
	}
	return h.Sum64()
}

// partitionPairs splits a history by pair of paths (a Move never leaves
// its pair).
func partitionPairs(history []porcupine.Operation) [][]porcupine.Operation {
	parts := make([][]porcupine.Operation, maxPaths/2)
	for _, op := range history {
		p := op.Input.(Input).Path / 2
		parts[p] = append(parts[p], op)
	}
	var out [][]porcupine.Operation
	for _, p := range parts {
		if len(p) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// describeState renders the files that exist or existed.
func describeState(paths []string, s state) string {
	var parts []string
	for i, f := range s {
		if i >= len(paths) || (!f.Present && f.Floor == 0) {
			continue
		}
		switch {
		case !f.Present:
			parts = append(parts, fmt.Sprintf("%s: absent (had ≤ v%d)", paths[i], f.Floor))
		case f.Version == 0:
			parts = append(parts, fmt.Sprintf("%s: %q v? (> v%d)", paths[i], f.Content, f.Floor))
		default:
			parts = append(parts, fmt.Sprintf("%s: %q v%d", paths[i], f.Content, f.Version))
		}
	}
	if len(parts) == 0 {
		return "(no files)"
	}
	return strings.Join(parts, ", ")
}
