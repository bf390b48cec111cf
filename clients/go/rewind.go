package agentvfs

import (
	"context"

	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
)

// RewindSelector says which changes Rewind undoes: exactly one of BySession,
// ByHandle, ByLabel, ByChangeset or SinceCursor. The zero value selects
// nothing and the server refuses it (INVALID_PARAM).
type RewindSelector struct {
	set func(*pb.RewindRequest)
}

// BySession selects the changes made in this State session
// (Options.Session).
func BySession(session string) RewindSelector {
	return RewindSelector{func(r *pb.RewindRequest) { r.Selector = &pb.RewindRequest_Session{Session: session} }}
}

// ByHandle selects the changes made through this handle.
func ByHandle(handle string) RewindSelector {
	return RewindSelector{func(r *pb.RewindRequest) { r.Selector = &pb.RewindRequest_Handle{Handle: handle} }}
}

// ByLabel selects the changes made under this label (Options.Label,
// WithLabel, a tool's label argument).
func ByLabel(label string) RewindSelector {
	return RewindSelector{func(r *pb.RewindRequest) { r.Selector = &pb.RewindRequest_Label{Label: label} }}
}

// ByChangeset selects the changes of one changeset (CommitResult.Changeset,
// RewindResult.Changeset, ChangeEvent.Changeset).
func ByChangeset(id string) RewindSelector {
	return RewindSelector{func(r *pb.RewindRequest) { r.Selector = &pb.RewindRequest_Changeset{Changeset: id} }}
}

// SinceCursor selects every change committed after cursor (a ChangeEvent's,
// or Watch.Cursor).
func SinceCursor(cursor string) RewindSelector {
	return RewindSelector{func(r *pb.RewindRequest) { r.Selector = &pb.RewindRequest_SinceCursor{SinceCursor: cursor} }}
}

// RewindOption sets a flag of a Rewind: DryRun, Force.
type RewindOption func(*pb.RewindRequest)

// DryRun makes Rewind change nothing and answer the files it would change
// and the unified diff (RewindResult.Diff).
func DryRun() RewindOption { return func(r *pb.RewindRequest) { r.DryRun = true } }

// Force undoes a file even when a change that was not selected came after
// the selected ones (it is undone too). Without it such a file fails the
// whole Rewind with a *ConflictError naming it.
func Force() RewindOption { return func(r *pb.RewindRequest) { r.Force = true } }

// RewindResult is what a Rewind did, or would do in a dry run.
type RewindResult struct {
	// Files is every file changed (or to change), in path order:
	// FromVersion (0: absent now), ToVersion (the version brought back, 0:
	// deleted), Version (the new version, 0 in a dry run), Deleted. Empty
	// when there was nothing to undo.
	Files []*pb.RewoundFile
	// Diff is a dry run's unified diff from the files now to the rewound
	// files ("" otherwise).
	Diff string
	// Changeset is the id of the changeset that applied the rewind ("" in a
	// dry run or when nothing changed): rewinding it by ByChangeset undoes
	// the rewind.
	Changeset string
}

// Rewind undoes, as one changeset, the changes under path ("" is "/") that
// sel picks: each file returns to its content before the first of them
// (docs/changesets.md § Rewind). A file that a change not selected changed
// afterwards fails it with a *ConflictError (CONFLICT, gRPC ABORTED) and
// nothing applies, unless Force. The rewind's own changes carry the call's
// label (Options.Label, WithLabel).
//
//	res, err := c.Rewind(ctx, "/src", agentvfs.ByLabel("turn-7"), agentvfs.DryRun())
//	fmt.Print(res.Diff)
//	res, err = c.Rewind(ctx, "/src", agentvfs.ByLabel("turn-7"))
//	var conflict *agentvfs.ConflictError
//	if errors.As(err, &conflict) { ... } // someone changed conflict.Path since
func (c *Client) Rewind(ctx context.Context, path string, sel RewindSelector, opts ...RewindOption) (*RewindResult, error) {
	req := &pb.RewindRequest{Path: path}
	if sel.set != nil {
		sel.set(req)
	}
	for _, opt := range opts {
		opt(req)
	}
	resp, err := c.Filesystem.Rewind(ctx, req)
	if err != nil {
		return nil, err
	}
	return &RewindResult{Files: resp.GetFiles(), Diff: resp.GetDiff(), Changeset: resp.GetChangeset()}, nil
}
