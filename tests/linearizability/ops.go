package main

import (
	"fmt"
	"strings"
)

// Kind names an operation of the workload.
type Kind string

// The operations the clients run.
const (
	KindRead      Kind = "read"
	KindWrite     Kind = "write"
	KindDelete    Kind = "delete"
	KindMove      Kind = "move"
	KindEdit      Kind = "edit"
	KindMultiEdit Kind = "multiedit"
	// KindCommit is a changeset (Filesystem/Commit): Ops applied in order,
	// all or nothing (docs/changesets.md).
	KindCommit Kind = "commit"
	// KindGrep is a literal Grep over every path of the workload at once
	// (its Path is 0 and unused): the one multi-file read, so it checks
	// that a search sees all files as of one instant.
	KindGrep Kind = "grep"
)

// Replacement is one string replacement of an Edit (exactly one) or a
// MultiEdit (several, each matched against the original text).
type Replacement struct {
	Old string `json:"old"`
	New string `json:"new"`
	All bool   `json:"all,omitempty"`
}

// Input is what a client asked: the operation, the path (an index into the
// workload's paths) and its arguments.
type Input struct {
	Kind Kind `json:"kind"`
	Path int  `json:"path"`
	// Dest is a Move's destination.
	Dest    int    `json:"dest"`
	Content string `json:"content,omitempty"`
	// CreateOnly applies to a Write's path or a Move's destination.
	CreateOnly bool `json:"create_only,omitempty"`
	// IfVersion applies to the path (a Move's source); nil: not sent.
	IfVersion *uint64       `json:"if_version,omitempty"`
	Edits     []Replacement `json:"edits,omitempty"`
	// Ops are a Commit's operations (writes, edits, multi-edits, deletes
	// and moves), each as its single call's Input; a Commit's Path is its
	// first operation's.
	Ops []Input `json:"ops,omitempty"`
	// Pattern is a Grep's fixed string.
	Pattern string `json:"pattern,omitempty"`
}

// paths lists the paths an operation names (a Commit: every operation's).
func (in Input) paths() []int {
	switch in.Kind {
	case KindMove:
		return []int{in.Path, in.Dest}
	case KindCommit:
		var out []int
		for _, op := range in.Ops {
			out = append(out, op.paths()...)
		}
		return out
	case KindGrep:
		out := make([]int, maxPaths)
		for p := range out {
			out[p] = p
		}
		return out
	}
	return []int{in.Path}
}

// CommittedFile is what a committed changeset answered of one file: its
// path (an index into the workload's paths, -1 for a path not among them),
// its new version (a deleted file: its deletion's, or 0), its size, and
// whether it is gone.
type CommittedFile struct {
	Path    int    `json:"path"`
	Version uint64 `json:"version,omitempty"`
	Size    uint64 `json:"size,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
}

// GrepHit is one matching line of a Grep: its file (an index into the
// workload's paths, -1 for a path not among them) and the line.
type GrepHit struct {
	Path int    `json:"path"`
	Line string `json:"line"`
}

// Output is what the server answered. Unknown marks an operation whose
// answer never came or says nothing of its outcome (a killed server, a reset
// connection, UNAVAILABLE, DEADLINE_EXCEEDED): it may or may not have taken
// effect.
type Output struct {
	Unknown bool `json:"unknown,omitempty"`
	// Contended marks a Commit answered UNAVAILABLE because it kept losing
	// races with other changes of its files (docs/changesets.md: "nothing
	// was applied"): a definite answer that changes nothing, not an
	// unknown one.
	Contended bool `json:"contended,omitempty"`
	// Code is the gRPC status code's name ("OK", "NotFound", "Aborted", ...).
	Code string `json:"code"`
	// Reason is google.rpc.ErrorInfo.reason, the envelope code.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// ActualVersion is ErrorInfo.metadata["actual_version"] of a version
	// conflict: the version the server found (0: no file).
	ActualVersion *uint64 `json:"actual_version,omitempty"`
	// EditIndex is ErrorInfo.metadata["edit_index"] of a refused MultiEdit.
	EditIndex *int `json:"edit_index,omitempty"`
	// OperationIndex is ErrorInfo.metadata["operation_index"] of a refused
	// Commit: which of its operations failed.
	OperationIndex *int `json:"operation_index,omitempty"`
	// Content and Version of a Read; Version alone of a Write, Edit or Move.
	Content      string `json:"content,omitempty"`
	Version      uint64 `json:"version,omitempty"`
	Created      bool   `json:"created,omitempty"`
	Replacements uint64 `json:"replacements,omitempty"`
	// Files are a Commit's answer: every file it touched, in path order.
	Files []CommittedFile `json:"files,omitempty"`
	// Hits are a Grep's matching lines, in path order.
	Hits []GrepHit `json:"hits,omitempty"`
}

// ok reports a successful answer.
func (o Output) ok() bool { return !o.Unknown && o.Code == "OK" }

// is reports a refusal with this gRPC code and envelope reason.
func (o Output) is(code, reason string) bool {
	return !o.Unknown && o.Code == code && o.Reason == reason
}

// describe renders an operation for the visualization and for reports,
// naming paths as the workload does.
func describe(paths []string, in Input, out Output) string {
	var b strings.Builder
	if in.Kind == KindCommit {
		b.WriteString("commit [")
		for i, op := range in.Ops {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(describeInput(paths, op))
		}
		b.WriteString("] ⇒ ")
		b.WriteString(out.summary(paths))
		return b.String()
	}
	b.WriteString(describeInput(paths, in))
	b.WriteString(" ⇒ ")
	b.WriteString(out.summary(paths))
	return b.String()
}

// describeInput renders what an operation asked.
func describeInput(paths []string, in Input) string {
	var b strings.Builder
	b.WriteString(string(in.Kind))
	b.WriteString(" ")
	if in.Kind == KindGrep {
		fmt.Fprintf(&b, "%q in every path", in.Pattern)
		return b.String()
	}
	b.WriteString(paths[in.Path])
	if in.Kind == KindMove {
		b.WriteString(" → ")
		b.WriteString(paths[in.Dest])
	}
	if in.Kind == KindWrite {
		fmt.Fprintf(&b, " %q", in.Content)
	}
	for _, e := range in.Edits {
		fmt.Fprintf(&b, " %q→%q", e.Old, e.New)
		if e.All {
			b.WriteString("(all)")
		}
	}
	if in.CreateOnly {
		b.WriteString(" create_only")
	}
	if in.IfVersion != nil {
		fmt.Fprintf(&b, " if_version=%d", *in.IfVersion)
	}
	return b.String()
}

// summary renders an answer in one line.
func (o Output) summary(paths []string) string {
	switch {
	case o.Unknown:
		return "unknown (" + o.Code + ")"
	case o.Code != "OK":
		s := o.Code + "/" + o.Reason
		if o.ActualVersion != nil {
			s += fmt.Sprintf(" found v%d", *o.ActualVersion)
		}
		if o.OperationIndex != nil {
			s += fmt.Sprintf(" operation %d", *o.OperationIndex)
		}
		if o.EditIndex != nil {
			s += fmt.Sprintf(" edit %d", *o.EditIndex)
		}
		if o.Message != "" {
			s += ": " + o.Message
		}
		return s
	case o.Files != nil:
		parts := make([]string, len(o.Files))
		for i, f := range o.Files {
			name := pathName(paths, f.Path)
			if f.Deleted {
				parts[i] = fmt.Sprintf("%s deleted v%d", name, f.Version)
			} else {
				parts[i] = fmt.Sprintf("%s v%d (%d bytes)", name, f.Version, f.Size)
			}
		}
		return "OK " + strings.Join(parts, ", ")
	case o.Hits != nil:
		parts := make([]string, len(o.Hits))
		for i, hit := range o.Hits {
			parts[i] = fmt.Sprintf("%s: %q", pathName(paths, hit.Path), hit.Line)
		}
		return "OK [" + strings.Join(parts, ", ") + "]"
	case o.Content != "":
		return fmt.Sprintf("%q v%d", o.Content, o.Version)
	case o.Replacements > 0:
		return fmt.Sprintf("OK v%d (%d replaced)", o.Version, o.Replacements)
	case o.Version > 0:
		s := fmt.Sprintf("OK v%d", o.Version)
		if o.Created {
			s += " created"
		}
		return s
	}
	return "OK"
}

// pathName names the workload path at index p, "?" for a path not among
// them (-1).
func pathName(paths []string, p int) string {
	if p >= 0 && p < len(paths) {
		return paths[p]
	}
	return "?"
}
