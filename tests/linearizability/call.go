package main

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	agentvfs "github.com/agentvfs/agentvfs/clients/go"
	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// definite are the gRPC codes whose answer states the outcome: OK, or a
// refusal that changed nothing. Any other answer (UNAVAILABLE,
// DEADLINE_EXCEEDED, a cut connection, INTERNAL) leaves it unknown.
var definite = map[codes.Code]bool{
	codes.OK:                 true,
	codes.NotFound:           true,
	codes.AlreadyExists:      true,
	codes.Aborted:            true,
	codes.InvalidArgument:    true,
	codes.FailedPrecondition: true,
	codes.PermissionDenied:   true,
	codes.Unauthenticated:    true,
	codes.ResourceExhausted:  true,
}

// contendedMessage begins the UNAVAILABLE of a changeset that lost every
// race with other changes of its files (src/service/changeset.rs): the
// contract says nothing was applied, so the model holds the server to it.
const contendedMessage = "the changeset lost "

// execute sends one operation through c and returns the server's answer.
func execute(ctx context.Context, c *agentvfs.Client, paths []string, in Input) Output {
	fs := c.Filesystem
	path := paths[in.Path]
	switch in.Kind {
	case KindRead:
		r, err := fs.Read(ctx, &pb.ReadRequest{Path: path})
		if err != nil {
			return failure(err)
		}
		return Output{Code: "OK", Content: r.GetContent(), Version: r.GetVersion()}
	case KindWrite:
		r, err := fs.Write(ctx, &pb.WriteRequest{Path: path, Content: in.Content, CreateOnly: in.CreateOnly, IfVersion: in.IfVersion})
		if err != nil {
			return failure(err)
		}
		return Output{Code: "OK", Version: r.GetVersion(), Created: r.GetCreated()}
	case KindDelete:
		if _, err := fs.Delete(ctx, &pb.DeleteRequest{Path: path, IfVersion: in.IfVersion}); err != nil {
			return failure(err)
		}
		return Output{Code: "OK"}
	case KindMove:
		r, err := fs.Move(ctx, &pb.MoveRequest{Source: path, Destination: paths[in.Dest], CreateOnly: in.CreateOnly, IfVersion: in.IfVersion})
		if err != nil {
			return failure(err)
		}
		return Output{Code: "OK", Version: r.GetVersion()}
	case KindEdit:
		e := in.Edits[0]
		r, err := fs.Edit(ctx, &pb.EditRequest{Path: path, OldString: e.Old, NewString: e.New, ReplaceAll: e.All, IfVersion: in.IfVersion})
		if err != nil {
			return failure(err)
		}
		return Output{Code: "OK", Version: r.GetVersion(), Replacements: r.GetReplacementsMade()}
	case KindMultiEdit:
		edits := make([]*pb.EditOperation, len(in.Edits))
		for i, e := range in.Edits {
			edits[i] = &pb.EditOperation{OldString: e.Old, NewString: e.New, ReplaceAll: e.All}
		}
		r, err := fs.MultiEdit(ctx, &pb.MultiEditRequest{Path: path, Edits: edits, IfVersion: in.IfVersion})
		if err != nil {
			return failure(err)
		}
		return Output{Code: "OK", Version: r.GetVersion(), Replacements: r.GetReplacementsMade()}
	case KindGrep:
		return grep(ctx, c, paths, in)
	case KindCommit:
		ops := make([]*pb.ChangesetOperation, len(in.Ops))
		for i, op := range in.Ops {
			ops[i] = changesetOperation(paths, op)
		}
		r, err := fs.Commit(ctx, &pb.CommitRequest{Operations: ops})
		if err != nil {
			return failure(err)
		}
		files := make([]CommittedFile, len(r.GetFiles()))
		for i, f := range r.GetFiles() {
			files[i] = CommittedFile{Path: slices.Index(paths, f.GetPath()), Version: f.GetVersion(), Size: f.GetSize(), Deleted: f.GetDeleted()}
		}
		return Output{Code: "OK", Files: files}
	}
	panic("unknown operation kind " + string(in.Kind))
}

// grep runs a literal Grep over the workload's directory. A Grep cut short
// by a budget answers nothing of the whole state: its outcome is unknown.
func grep(ctx context.Context, c *agentvfs.Client, paths []string, in Input) Output {
	search := c.Grep(&pb.GrepRequest{Pattern: in.Pattern, Path: mountPrefix, Literal: true})
	out := Output{Code: "OK", Hits: []GrepHit{}}
	for m, err := range search.All(ctx) {
		if err != nil {
			return failure(err)
		}
		out.Hits = append(out.Hits, GrepHit{Path: slices.Index(paths, m.GetPath()), Line: m.GetLine()})
	}
	if why := search.Summary().GetAbortedReason(); why != pb.AbortedReason_ABORTED_REASON_UNSPECIFIED {
		return Output{Unknown: true, Code: "Grep stopped early: " + why.String()}
	}
	return out
}

// executeTorn answers a Commit as a server without atomicity would: its
// operations sent one by one as single calls, the first refusal the
// answer (the operations before it stay applied), else every touched
// file's last version. It exists to check that the checker rejects such
// histories (-torn-commits).
func executeTorn(ctx context.Context, c *agentvfs.Client, paths []string, in Input) Output {
	type last struct {
		touched, deleted bool
		version, size    uint64
	}
	var files [maxPaths]last
	for i, op := range in.Ops {
		out := execute(ctx, c, paths, op)
		if !out.ok() {
			out.OperationIndex = &i
			return out
		}
		switch op.Kind {
		case KindDelete:
			files[op.Path] = last{touched: true, deleted: true}
		case KindMove:
			files[op.Path] = last{touched: true, deleted: true}
			files[op.Dest] = last{touched: true, version: out.Version}
		default:
			files[op.Path] = last{touched: true, version: out.Version}
		}
	}
	out := Output{Code: "OK", Files: []CommittedFile{}}
	for p, f := range files {
		if !f.touched {
			continue
		}
		if !f.deleted {
			// The size, from the file as it is now (a torn server would
			// know it; this client has to look).
			r := execute(ctx, c, paths, Input{Kind: KindRead, Path: p})
			f.size = uint64(len(r.Content))
		}
		out.Files = append(out.Files, CommittedFile{Path: p, Version: f.version, Size: f.size, Deleted: f.deleted})
	}
	return out
}

// changesetOperation is one operation of a Commit: its single call's
// request.
func changesetOperation(paths []string, in Input) *pb.ChangesetOperation {
	path := paths[in.Path]
	switch in.Kind {
	case KindWrite:
		return &pb.ChangesetOperation{Operation: &pb.ChangesetOperation_Write{Write: &pb.WriteRequest{Path: path, Content: in.Content, CreateOnly: in.CreateOnly, IfVersion: in.IfVersion}}}
	case KindDelete:
		return &pb.ChangesetOperation{Operation: &pb.ChangesetOperation_Delete{Delete: &pb.DeleteRequest{Path: path, IfVersion: in.IfVersion}}}
	case KindMove:
		return &pb.ChangesetOperation{Operation: &pb.ChangesetOperation_Move{Move: &pb.MoveRequest{Source: path, Destination: paths[in.Dest], CreateOnly: in.CreateOnly, IfVersion: in.IfVersion}}}
	case KindEdit:
		e := in.Edits[0]
		return &pb.ChangesetOperation{Operation: &pb.ChangesetOperation_Edit{Edit: &pb.EditRequest{Path: path, OldString: e.Old, NewString: e.New, ReplaceAll: e.All, IfVersion: in.IfVersion}}}
	case KindMultiEdit:
		edits := make([]*pb.EditOperation, len(in.Edits))
		for i, e := range in.Edits {
			edits[i] = &pb.EditOperation{OldString: e.Old, NewString: e.New, ReplaceAll: e.All}
		}
		return &pb.ChangesetOperation{Operation: &pb.ChangesetOperation_MultiEdit{MultiEdit: &pb.MultiEditRequest{Path: path, Edits: edits, IfVersion: in.IfVersion}}}
	}
	panic("no changeset operation of kind " + string(in.Kind))
}

// failure turns a failed call into its answer: code, envelope reason,
// message and the metadata the model checks.
func failure(err error) Output {
	var e *agentvfs.Error
	if !errors.As(err, &e) {
		return Output{Unknown: true, Code: status.Code(err).String(), Message: err.Error()}
	}
	out := Output{
		Unknown: !definite[e.Status],
		Code:    e.Status.String(),
		Reason:  e.Code,
		Message: e.Message,
	}
	if e.Status == codes.Unavailable && strings.Contains(e.Message, contendedMessage) {
		out.Unknown, out.Contended = false, true
	}
	if v, err := strconv.ParseUint(e.Metadata["actual_version"], 10, 64); err == nil {
		out.ActualVersion = &v
	}
	if i, err := strconv.Atoi(e.Metadata["edit_index"]); err == nil {
		out.EditIndex = &i
	}
	if i, err := strconv.Atoi(e.Metadata["operation_index"]); err == nil {
		out.OperationIndex = &i
	}
	return out
}

// contractBreach says why an answer is one the contract never gives to
// this workload, whatever the state: "" when it may be given. Unknown
// outcomes from the transport or the store (UNAVAILABLE,
// DEADLINE_EXCEEDED, CANCELLED) are faults, not breaches; an INTERNAL
// error from the server is a breach (docs/object-storage.md § Failures:
// a store that fails is UNAVAILABLE).
func contractBreach(out Output) string {
	switch {
	case !out.Unknown:
		return ""
	case out.Code == codes.Internal.String() && out.Reason != "":
		return "an INTERNAL error"
	case out.Code == codes.Unavailable.String(), out.Code == codes.DeadlineExceeded.String(),
		out.Code == codes.Canceled.String(), out.Reason == "":
		return ""
	}
	return "an answer outside the contract"
}
