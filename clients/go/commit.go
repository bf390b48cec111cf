package agentvfs

import (
	"context"

	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
)

// ChangesetOp is one operation of a changeset (Commit). Build it with
// WriteOp, EditOp, MultiEditOp, DeleteOp or MoveOp; each is the request of
// the single-file RPC of the same name, with its meaning
// (docs/changesets.md).
type ChangesetOp struct {
	op *pb.ChangesetOperation
}

// Proto is the operation as the ChangesetOperation message Commit sends.
func (o ChangesetOp) Proto() *pb.ChangesetOperation { return o.op }

// OpOption sets an optional field of an operation: IfVersion, CreateOnly,
// ReplaceAll. An option the operation has no field for is ignored.
type OpOption func(*opOptions)

type opOptions struct {
	ifVersion  *uint64
	createOnly bool
	replaceAll bool
}

// IfVersion makes the operation apply only when its file (a move's source)
// is at version v when the operations before it have run (0: must not
// exist), else the changeset fails with a *ConflictError. A file an earlier
// operation of the changeset changed has no version yet: INVALID_ARGUMENT.
func IfVersion(v uint64) OpOption { return func(o *opOptions) { o.ifVersion = &v } }

// CreateOnly makes a write (a move: its destination) fail with fs.ErrExist
// when the file exists.
func CreateOnly() OpOption { return func(o *opOptions) { o.createOnly = true } }

// ReplaceAll makes an edit replace every occurrence of its old string
// instead of requiring exactly one.
func ReplaceAll() OpOption { return func(o *opOptions) { o.replaceAll = true } }

func options(opts []OpOption) opOptions {
	var o opOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WriteOp writes content to path, creating it (and missing parents) or
// replacing it. Options: IfVersion, CreateOnly.
func WriteOp(path, content string, opts ...OpOption) ChangesetOp {
	o := options(opts)
	return ChangesetOp{&pb.ChangesetOperation{Operation: &pb.ChangesetOperation_Write{Write: &pb.WriteRequest{
		Path: path, Content: content, CreateOnly: o.createOnly, IfVersion: o.ifVersion,
	}}}}
}

// EditOp replaces oldString, which must occur exactly once (every
// occurrence with ReplaceAll), by newString in the file at path as the
// operations before it left it. Options: IfVersion, ReplaceAll.
func EditOp(path, oldString, newString string, opts ...OpOption) ChangesetOp {
	o := options(opts)
	return ChangesetOp{&pb.ChangesetOperation{Operation: &pb.ChangesetOperation_Edit{Edit: &pb.EditRequest{
		Path: path, OldString: oldString, NewString: newString, ReplaceAll: o.replaceAll, IfVersion: o.ifVersion,
	}}}}
}

// MultiEditOp applies edits to the file at path, each matched against its
// text before any of them (as MultiEdit). Options: IfVersion.
func MultiEditOp(path string, edits []*pb.EditOperation, opts ...OpOption) ChangesetOp {
	o := options(opts)
	return ChangesetOp{&pb.ChangesetOperation{Operation: &pb.ChangesetOperation_MultiEdit{MultiEdit: &pb.MultiEditRequest{
		Path: path, Edits: edits, IfVersion: o.ifVersion,
	}}}}
}

// DeleteOp deletes the file at path (a changeset deletes files, not
// directories). Options: IfVersion.
func DeleteOp(path string, opts ...OpOption) ChangesetOp {
	o := options(opts)
	return ChangesetOp{&pb.ChangesetOperation{Operation: &pb.ChangesetOperation_Delete{Delete: &pb.DeleteRequest{
		Path: path, IfVersion: o.ifVersion,
	}}}}
}

// MoveOp moves the file at source to destination on the same mount.
// Options: IfVersion (the source's), CreateOnly (refuse an existing
// destination).
func MoveOp(source, destination string, opts ...OpOption) ChangesetOp {
	o := options(opts)
	return ChangesetOp{&pb.ChangesetOperation{Operation: &pb.ChangesetOperation_Move{Move: &pb.MoveRequest{
		Source: source, Destination: destination, IfVersion: o.ifVersion, CreateOnly: o.createOnly,
	}}}}
}

// CommitResult is what a changeset did.
type CommitResult struct {
	// Files is every file the changeset touched, in path order: its new
	// version and size, or Deleted.
	Files []*pb.CommittedFile
}

// Commit applies ops, all on one mount, as one changeset: in order, each
// seeing what the ones before it did, and all or nothing. When an operation
// fails nothing is applied and the error is the *Error of that operation
// (errors.Is(err, fs.ErrNotExist), a *ConflictError, ...) whose
// OperationIndex names it; operations on two mounts, or a path below
// another, are INVALID_PARAM before any work.
//
//	res, err := c.Commit(ctx,
//		agentvfs.WriteOp("/src/new.py", "print('hi')\n", agentvfs.CreateOnly()),
//		agentvfs.EditOp("/src/app.py", "old()", "new()", agentvfs.IfVersion(seen)),
//		agentvfs.MoveOp("/src/a.py", "/src/b.py"),
//		agentvfs.DeleteOp("/src/old.py"))
func (c *Client) Commit(ctx context.Context, ops ...ChangesetOp) (*CommitResult, error) {
	req := &pb.CommitRequest{Operations: make([]*pb.ChangesetOperation, len(ops))}
	for i, op := range ops {
		req.Operations[i] = op.op
	}
	resp, err := c.Filesystem.Commit(ctx, req)
	if err != nil {
		return nil, err
	}
	return &CommitResult{Files: resp.GetFiles()}, nil
}
