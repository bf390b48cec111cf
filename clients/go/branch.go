package agentvfs

import (
	"context"
	"iter"

	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
)

// CreateBranch forks the directory path (on a State, Store or object mount)
// into the branch name, copy-on-write (docs/branches.md § Fork). Work in it
// with WithBranch or Options.Branch.
func (c *Client) CreateBranch(ctx context.Context, name, path string) (*pb.Branch, error) {
	resp, err := c.Filesystem.CreateBranch(ctx, &pb.CreateBranchRequest{Name: name, Path: path})
	if err != nil {
		return nil, err
	}
	return resp.GetBranch(), nil
}

// ListBranches lists the caller's branches: name, root, creation time,
// creator, files changed and bytes held.
func (c *Client) ListBranches(ctx context.Context) ([]*pb.Branch, error) {
	resp, err := c.Filesystem.ListBranches(ctx, &pb.ListBranchesRequest{})
	if err != nil {
		return nil, err
	}
	return resp.GetBranches(), nil
}

// DiffOptions tune a DiffBranch.
type DiffOptions struct {
	// PageSize is the most files each call asks for (1-1000; 0: the
	// server's 1000).
	PageSize uint32
}

// DiffBranch iterates over the files the branch changed against its base
// now, in path order ("added", "changed", "deleted" or "moved", each with
// its unified diff), asking for the next page (next_after) as the loop
// goes on; an error ends it. Breaking the loop asks for no more pages.
//
//	for d, err := range c.DiffBranch(ctx, "try-1", agentvfs.DiffOptions{}) {
//		if err != nil { ... }
//		fmt.Println(d.GetKind(), d.GetPath())
//	}
func (c *Client) DiffBranch(ctx context.Context, name string, opts DiffOptions) iter.Seq2[*pb.BranchFileDiff, error] {
	return func(yield func(*pb.BranchFileDiff, error) bool) {
		req := &pb.DiffBranchRequest{Name: name, Limit: opts.PageSize}
		for {
			resp, err := c.Filesystem.DiffBranch(ctx, req)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, f := range resp.GetFiles() {
				if !yield(f, nil) {
					return
				}
			}
			if resp.GetNextAfter() == "" {
				return
			}
			req.After = resp.GetNextAfter()
		}
	}
}

// MergeOption settles a conflict or sets a flag of a MergeBranch: Resolve,
// ResolveDelete, DiscardAfter.
type MergeOption func(*pb.MergeBranchRequest)

// Resolve settles the conflict on path: the file becomes content.
func Resolve(path string, content []byte) MergeOption {
	return func(r *pb.MergeBranchRequest) {
		r.Resolutions = append(r.Resolutions, &pb.MergeResolution{Path: path, Resolution: &pb.MergeResolution_Content{Content: content}})
	}
}

// ResolveDelete settles the conflict on path by deleting the file.
func ResolveDelete(path string) MergeOption {
	return func(r *pb.MergeBranchRequest) {
		r.Resolutions = append(r.Resolutions, &pb.MergeResolution{Path: path, Resolution: &pb.MergeResolution_Delete{Delete: true}})
	}
}

// DiscardAfter deletes the branch once the merge applied.
func DiscardAfter() MergeOption { return func(r *pb.MergeBranchRequest) { r.Discard = true } }

// MergeBranch merges the branch into its base as one changeset, three-way
// (docs/branches.md § Merge). When files conflict the answer lists them in
// Conflicts, each with its three versions (Ancestor, Branch, Base: nil when
// there was no file), and nothing is applied: merge again with a Resolve or
// ResolveDelete for each.
//
//	res, err := c.MergeBranch(ctx, "try-1")
//	for _, k := range res.GetConflicts() {
//		opts = append(opts, agentvfs.Resolve(k.GetPath(), settle(k.Ancestor, k.Branch, k.Base)))
//	}
//	res, err = c.MergeBranch(ctx, "try-1", append(opts, agentvfs.DiscardAfter())...)
func (c *Client) MergeBranch(ctx context.Context, name string, opts ...MergeOption) (*pb.MergeBranchResponse, error) {
	req := &pb.MergeBranchRequest{Name: name}
	for _, opt := range opts {
		opt(req)
	}
	return c.Filesystem.MergeBranch(ctx, req)
}

// DiscardBranch deletes the branch and everything it holds; the base is
// untouched.
func (c *Client) DiscardBranch(ctx context.Context, name string) error {
	_, err := c.Filesystem.DiscardBranch(ctx, &pb.DiscardBranchRequest{Name: name})
	return err
}
