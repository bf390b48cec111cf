package agentvfs_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	agentvfs "github.com/agentvfs/agentvfs/clients/go"
	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
	"google.golang.org/grpc/codes"
)

func newClient(t *testing.T, addr, session string) *agentvfs.Client {
	t.Helper()
	c, err := agentvfs.NewClient(addr, agentvfs.Options{Session: session})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestErrorsCarryTheEnvelopeCode: a failed call is an *Error with the
// ErrorInfo reason, the gRPC code and the ErrorInfo metadata.
func TestErrorsCarryTheEnvelopeCode(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, startServer(t, ""), "errors")
	w, err := c.Filesystem.Write(ctx, &pb.WriteRequest{Path: "/v.txt", Content: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Filesystem.Write(ctx, &pb.WriteRequest{Path: "/v.txt", Content: "2"}); err != nil {
		t.Fatal(err)
	}
	v1 := w.GetVersion()
	_, err = c.Filesystem.Write(ctx, &pb.WriteRequest{Path: "/v.txt", Content: "3", IfVersion: &v1})
	var e *agentvfs.Error
	if !errors.As(err, &e) || e.Code != agentvfs.CodeConflict || e.Status != codes.Aborted || e.Metadata["path"] != "/v.txt" {
		t.Fatalf("want CONFLICT/Aborted with metadata, got %#v", err)
	}
	if agentvfs.CodeOf(nil) != "" {
		t.Fatal("CodeOf(nil) must be empty")
	}
}

// TestCancelledContextStopsASearch: cancelling the context ends the
// iteration with an error that errors.Is context.Canceled, and breaking out of
// a loop leaves the client usable.
func TestCancelledContextStopsASearch(t *testing.T) {
	c := newClient(t, startServer(t, ""), "cancel")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.Upload(ctx, &pb.WriteBytesHeader{Path: "/many.txt"}, bytes.NewReader(bytes.Repeat([]byte("needle\n"), 200_000))); err != nil {
		t.Fatal(err)
	}
	for range c.Grep(&pb.GrepRequest{Pattern: "needle", Path: "/"}).All(ctx) {
		break
	}
	seen := 0
	var last error
	for _, err := range c.Grep(&pb.GrepRequest{Pattern: "needle", Path: "/"}).All(ctx) {
		if err != nil {
			last = err
			break
		}
		seen++
		cancel()
	}
	if !errors.Is(last, context.Canceled) || agentvfs.CodeOf(last) != "" || seen == 0 {
		t.Fatalf("want context.Canceled after %d results, got %v", seen, last)
	}
}

// TestUploadAndDownloadInChunks: several chunks go up and come back intact,
// and the search summary is set after a complete iteration.
func TestUploadAndDownloadInChunks(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, startServer(t, ""), "chunks")
	data := bytes.Repeat([]byte{0, 1, 2, 3, 4, 5, 6}, 3*agentvfs.ChunkBytes/7+5)
	w, err := c.Upload(ctx, &pb.WriteBytesHeader{Path: "/blob.bin", CreateOnly: true}, bytes.NewReader(data))
	if err != nil || w.GetBytesWritten() != uint64(len(data)) {
		t.Fatalf("upload: %v %v", w, err)
	}
	var out bytes.Buffer
	info, err := c.Download(ctx, "/blob.bin", &out)
	if err != nil || !bytes.Equal(out.Bytes(), data) || info.GetSize() != uint64(len(data)) {
		t.Fatalf("download: %v, %d bytes, equal=%v", err, out.Len(), bytes.Equal(out.Bytes(), data))
	}
	if _, err := c.Upload(ctx, &pb.WriteBytesHeader{Path: "/blob.bin", CreateOnly: true}, bytes.NewReader(data)); agentvfs.CodeOf(err) != agentvfs.CodeConflict {
		t.Fatalf("create-only upload over a file: want CONFLICT, got %v", err)
	}
	s := c.Glob(&pb.GlobRequest{Pattern: "*.bin", Path: "/"})
	var paths []string
	for e, err := range s.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, e.GetPath())
	}
	if len(paths) != 1 || s.Summary().GetMatched() != 1 {
		t.Fatalf("glob: %v %v", paths, s.Summary())
	}
}

// TestMoveRenamesFilesAndTrees: Move through the typed stub renames a file
// (IfVersion is the source's) and a directory tree; its conflicts and a move
// across mounts are *Error with the envelope code.
func TestMoveRenamesFilesAndTrees(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, startServer(t, ""), "move")
	write := func(path, content string) uint64 {
		t.Helper()
		w, err := c.Filesystem.Write(ctx, &pb.WriteRequest{Path: path, Content: content})
		if err != nil {
			t.Fatal(err)
		}
		return w.GetVersion()
	}
	v1 := write("/a.txt", "alpha")
	write("/b.txt", "beta")
	_, err := c.Filesystem.Move(ctx, &pb.MoveRequest{Source: "/a.txt", Destination: "/b.txt", CreateOnly: true})
	var e *agentvfs.Error
	if !errors.As(err, &e) || e.Code != agentvfs.CodeConflict || e.Status != codes.AlreadyExists {
		t.Fatalf("create-only over a file: want CONFLICT/AlreadyExists, got %v", err)
	}
	v2 := write("/a.txt", "alpha 2")
	_, err = c.Filesystem.Move(ctx, &pb.MoveRequest{Source: "/a.txt", Destination: "/c.txt", IfVersion: &v1})
	if !errors.As(err, &e) || e.Code != agentvfs.CodeConflict || e.Status != codes.Aborted {
		t.Fatalf("stale IfVersion: want CONFLICT/Aborted, got %v", err)
	}
	_, err = c.Filesystem.Move(ctx, &pb.MoveRequest{Source: "/a.txt", Destination: "/memories/a.txt"})
	if !errors.As(err, &e) || e.Code != agentvfs.CodeInvalidParam || e.Status != codes.InvalidArgument || !strings.Contains(e.Message, "across mounts") {
		t.Fatalf("across mounts: want INVALID_PARAM/InvalidArgument, got %v", err)
	}

	m, err := c.Filesystem.Move(ctx, &pb.MoveRequest{Source: "/a.txt", Destination: "/new/a.txt", IfVersion: &v2})
	if err != nil || m.GetFilesMoved() != 1 || m.GetVersion() <= v2 {
		t.Fatalf("move a file: %v %v", m, err)
	}
	r, err := c.Filesystem.Read(ctx, &pb.ReadRequest{Path: "/new/a.txt"})
	if err != nil || r.GetContent() != "alpha 2" || r.GetVersion() != m.GetVersion() {
		t.Fatalf("read the moved file: %v %v", r, err)
	}
	if _, err := c.Filesystem.Stat(ctx, &pb.StatRequest{Path: "/a.txt"}); agentvfs.CodeOf(err) != agentvfs.CodeNotFound {
		t.Fatalf("the source after the move: want NOT_FOUND, got %v", err)
	}

	write("/tree/one.txt", "1")
	write("/tree/sub/two.txt", "2")
	m, err = c.Filesystem.Move(ctx, &pb.MoveRequest{Source: "/tree", Destination: "/moved/tree"})
	if err != nil || m.GetFilesMoved() != 2 || m.GetVersion() != 0 {
		t.Fatalf("move a tree: %v %v", m, err)
	}
	if r, err := c.Filesystem.Read(ctx, &pb.ReadRequest{Path: "/moved/tree/sub/two.txt"}); err != nil || r.GetContent() != "2" {
		t.Fatalf("read below the moved tree: %v %v", r, err)
	}
}

// TestCopyCopiesAFile: Copy through the typed stub copies a file to a new
// path (its parents created) under a version of its own; create-only, a
// stale IfVersion (the destination's) and a copy across mounts are *Error
// with the envelope code.
func TestCopyCopiesAFile(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, startServer(t, ""), "copy")
	if _, err := c.Filesystem.Write(ctx, &pb.WriteRequest{Path: "/a.txt", Content: "alpha"}); err != nil {
		t.Fatal(err)
	}
	out, err := c.Filesystem.Copy(ctx, &pb.CopyRequest{Source: "/a.txt", Destination: "/new/b.txt"})
	if err != nil || out.GetBytesWritten() != 5 || !out.GetCreated() {
		t.Fatalf("copy: %v %v", out, err)
	}
	r, err := c.Filesystem.Read(ctx, &pb.ReadRequest{Path: "/new/b.txt"})
	if err != nil || r.GetContent() != "alpha" || r.GetVersion() != out.GetVersion() {
		t.Fatalf("read the copy: %v %v", r, err)
	}
	var e *agentvfs.Error
	_, err = c.Filesystem.Copy(ctx, &pb.CopyRequest{Source: "/a.txt", Destination: "/new/b.txt", CreateOnly: true})
	if !errors.As(err, &e) || e.Code != agentvfs.CodeConflict || e.Status != codes.AlreadyExists {
		t.Fatalf("create-only over a file: want CONFLICT/AlreadyExists, got %v", err)
	}
	stale := out.GetVersion() + 1
	_, err = c.Filesystem.Copy(ctx, &pb.CopyRequest{Source: "/a.txt", Destination: "/new/b.txt", IfVersion: &stale})
	if !errors.As(err, &e) || e.Code != agentvfs.CodeConflict || e.Status != codes.Aborted {
		t.Fatalf("stale IfVersion: want CONFLICT/Aborted, got %v", err)
	}
	_, err = c.Filesystem.Copy(ctx, &pb.CopyRequest{Source: "/a.txt", Destination: "/memories/a.txt"})
	if !errors.As(err, &e) || e.Code != agentvfs.CodeInvalidParam || !strings.Contains(e.Message, "cannot copy across mounts") {
		t.Fatalf("across mounts: want INVALID_PARAM, got %v", err)
	}
}

// TestCommitErrorsAreNativeAndNameTheOperation: a changeset whose second
// operation edits a missing file fails as fs.ErrNotExist with
// OperationIndex 1 and applies nothing; an error of another call has no
// operation index.
func TestCommitErrorsAreNativeAndNameTheOperation(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, startServer(t, ""), "commit")
	_, err := c.Commit(ctx, agentvfs.WriteOp("/c/a.txt", "a\n"), agentvfs.EditOp("/c/missing.txt", "x", "y"))
	var e *agentvfs.Error
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &e) || e.OperationIndex() != 1 {
		t.Fatalf("want NOT_FOUND of operation 1, got %v", err)
	}
	if _, err := c.Filesystem.Stat(ctx, &pb.StatRequest{Path: "/c/a.txt"}); !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &e) || e.OperationIndex() != -1 {
		t.Fatalf("want NOT_FOUND without an operation, got %v", err)
	}
	res, err := c.Commit(ctx, agentvfs.WriteOp("/c/a.txt", "a\n", agentvfs.CreateOnly()), agentvfs.EditOp("/c/a.txt", "a", "b", agentvfs.ReplaceAll()))
	if err != nil || len(res.Files) != 1 || res.Files[0].GetPath() != "/c/a.txt" || res.Files[0].GetSize() != 2 {
		t.Fatalf("want /c/a.txt of 2 bytes, got %v %v", res, err)
	}
}

// TestLabelsAndRewind: Options.Label labels a client's changes, WithLabel
// one call's instead; Rewind by that label undoes exactly them, DryRun
// first changing nothing; a zero selector is the server's INVALID_PARAM.
func TestLabelsAndRewind(t *testing.T) {
	ctx := context.Background()
	addr := startServer(t, "")
	c, err := agentvfs.NewClient(addr, agentvfs.Options{Session: "labels", Label: "client-label"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Filesystem.Write(ctx, &pb.WriteRequest{Path: "/l/a.txt", Content: "one\n"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Commit(agentvfs.WithLabel(ctx, "turn-2"), agentvfs.EditOp("/l/a.txt", "one", "two"), agentvfs.WriteOp("/l/b.txt", "b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Changeset == "" {
		t.Fatal("a commit answers its changeset id")
	}
	versions, err := c.Filesystem.ListVersions(ctx, &pb.ListVersionsRequest{Path: "/l/a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, v := range versions.GetVersions() {
		labels = append(labels, v.GetLabel()+"/"+v.GetChangeset())
	}
	if want := []string{"turn-2/" + res.Changeset, "client-label/"}; strings.Join(labels, " ") != strings.Join(want, " ") {
		t.Fatalf("labels/changesets newest first: got %v, want %v", labels, want)
	}
	dry, err := c.Rewind(ctx, "/l", agentvfs.ByLabel("turn-2"), agentvfs.DryRun())
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Files) != 2 || dry.Changeset != "" || !strings.Contains(dry.Diff, "-two\n+one") {
		t.Fatalf("dry run: %+v", dry)
	}
	undo, err := c.Rewind(ctx, "/l", agentvfs.ByLabel("turn-2"))
	if err != nil {
		t.Fatal(err)
	}
	if undo.Changeset == "" || undo.Diff != "" || len(undo.Files) != 2 || !undo.Files[1].GetDeleted() {
		t.Fatalf("rewind: %+v", undo)
	}
	read, err := c.Filesystem.Read(ctx, &pb.ReadRequest{Path: "/l/a.txt"})
	if err != nil || read.GetContent() != "one\n" {
		t.Fatalf("a.txt after the rewind: %v %v", read.GetContent(), err)
	}
	if _, err := c.Filesystem.Read(ctx, &pb.ReadRequest{Path: "/l/b.txt"}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("b.txt after the rewind: %v", err)
	}
	if _, err := c.Rewind(ctx, "/l", agentvfs.RewindSelector{}); agentvfs.CodeOf(err) != agentvfs.CodeInvalidParam {
		t.Fatalf("a zero selector: want INVALID_PARAM, got %v", err)
	}
}
