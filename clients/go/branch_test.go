package agentvfs_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	agentvfs "github.com/agentvfs/agentvfs/clients/go"
	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
)

func readText(t *testing.T, ctx context.Context, c *agentvfs.Client, path string) string {
	t.Helper()
	r, err := c.Filesystem.Read(ctx, &pb.ReadRequest{Path: path})
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return r.GetContent()
}

func write(t *testing.T, ctx context.Context, c *agentvfs.Client, path, content string) {
	t.Helper()
	if _, err := c.Filesystem.Write(ctx, &pb.WriteRequest{Path: path, Content: content}); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// TestBranches: changes made through Options.Branch are invisible on the
// base and seen through WithBranch; DiffBranch follows its pages; a
// conflicting merge answers the three versions and applies nothing; a merge
// with a resolution applies every change and discards the branch.
func TestBranches(t *testing.T) {
	ctx := context.Background()
	addr := startServer(t, "")
	c := newClient(t, addr, "branches")
	write(t, ctx, c, "/b/a.txt", "one\ntwo\n")
	write(t, ctx, c, "/b/d.txt", "d\n")
	br, err := c.CreateBranch(ctx, "try", "/b")
	if err != nil || br.GetName() != "try" || br.GetRoot() != "/b" {
		t.Fatalf("create: %v %v", br, err)
	}
	in, err := agentvfs.NewClient(addr, agentvfs.Options{Session: "branches", Branch: "try"})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	write(t, ctx, in, "/b/a.txt", "ONE\ntwo\n")
	write(t, ctx, in, "/b/n.txt", "new\n")
	if _, err := in.Filesystem.Delete(ctx, &pb.DeleteRequest{Path: "/b/d.txt"}); err != nil {
		t.Fatal(err)
	}
	if got := readText(t, ctx, c, "/b/a.txt"); got != "one\ntwo\n" {
		t.Fatalf("the base sees the branch's write: %q", got)
	}
	if got := readText(t, agentvfs.WithBranch(ctx, "try"), c, "/b/a.txt"); got != "ONE\ntwo\n" {
		t.Fatalf("WithBranch reads %q", got)
	}
	var kinds []string
	for d, err := range c.DiffBranch(ctx, "try", agentvfs.DiffOptions{PageSize: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, d.GetKind()+" "+d.GetPath())
	}
	if want := "changed /b/a.txt,deleted /b/d.txt,added /b/n.txt"; strings.Join(kinds, ",") != want {
		t.Fatalf("diff in pages of one: got %v, want %s", kinds, want)
	}
	list, err := c.ListBranches(ctx)
	if err != nil || len(list) != 1 || list[0].GetFilesChanged() != 3 {
		t.Fatalf("list: %v %v", list, err)
	}

	write(t, ctx, c, "/b/a.txt", "uno\ntwo\n")
	res, err := c.MergeBranch(ctx, "try")
	if err != nil {
		t.Fatal(err)
	}
	if res.GetChangeset() != "" || len(res.GetConflicts()) != 1 {
		t.Fatalf("a conflicting merge: %v", res)
	}
	k := res.GetConflicts()[0]
	if k.GetPath() != "/b/a.txt" || string(k.Ancestor) != "one\ntwo\n" || string(k.Branch) != "ONE\ntwo\n" || string(k.Base) != "uno\ntwo\n" {
		t.Fatalf("the conflict's three versions: %v", k)
	}
	if got := readText(t, ctx, c, "/b/d.txt"); got != "d\n" {
		t.Fatalf("a conflicting merge applied the delete: %q", got)
	}

	res, err = c.MergeBranch(ctx, "try", agentvfs.Resolve("/b/a.txt", []byte("merged\n")), agentvfs.DiscardAfter())
	if err != nil || res.GetChangeset() == "" || !res.GetDiscarded() || len(res.GetFiles()) != 3 {
		t.Fatalf("a resolved merge: %v %v", res, err)
	}
	if got := readText(t, ctx, c, "/b/a.txt") + readText(t, ctx, c, "/b/n.txt"); got != "merged\nnew\n" {
		t.Fatalf("after the merge: %q", got)
	}
	if _, err := c.Filesystem.Read(ctx, &pb.ReadRequest{Path: "/b/d.txt"}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("d.txt after the merge: %v", err)
	}
	if err := c.DiscardBranch(ctx, "try"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("discarding a merged and discarded branch: %v", err)
	}
}

// TestResolveDeleteAndDiscard: a conflict settled by deleting the file, and
// a branch discarded without merging leaves the base as it was.
func TestResolveDeleteAndDiscard(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, startServer(t, ""), "resolve")
	write(t, ctx, c, "/r/a.txt", "a\n")
	write(t, ctx, c, "/r/keep.txt", "keep\n")
	if _, err := c.CreateBranch(ctx, "one", "/r"); err != nil {
		t.Fatal(err)
	}
	write(t, agentvfs.WithBranch(ctx, "one"), c, "/r/a.txt", "branch\n")
	write(t, ctx, c, "/r/a.txt", "base\n")
	res, err := c.MergeBranch(ctx, "one", agentvfs.ResolveDelete("/r/a.txt"))
	if err != nil || len(res.GetConflicts()) != 0 || res.GetDiscarded() {
		t.Fatalf("a merge resolved by a delete: %v %v", res, err)
	}
	if _, err := c.Filesystem.Read(ctx, &pb.ReadRequest{Path: "/r/a.txt"}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a.txt after the merge: %v", err)
	}
	if _, err := c.CreateBranch(ctx, "two", "/r"); err != nil {
		t.Fatal(err)
	}
	write(t, agentvfs.WithBranch(ctx, "two"), c, "/r/b.txt", "b\n")
	if err := c.DiscardBranch(ctx, "two"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Filesystem.Read(ctx, &pb.ReadRequest{Path: "/r/b.txt"}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a discarded branch's file on the base: %v", err)
	}
	if _, err := c.Filesystem.Read(agentvfs.WithBranch(ctx, "two"), &pb.ReadRequest{Path: "/r/b.txt"}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("reading in a discarded branch: %v", err)
	}
}
