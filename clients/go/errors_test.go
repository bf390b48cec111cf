package agentvfs_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	agentvfs "github.com/agentvfs/agentvfs/clients/go"
	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
)

// TestCodesAreTheErrorReasons: the Code constants are the reasons of the
// contract (proto/agentvfs/v1/errors.proto) without their prefix, one for
// each reason.
func TestCodesAreTheErrorReasons(t *testing.T) {
	codes := []string{
		agentvfs.CodeInvalidParam, agentvfs.CodeNotFound, agentvfs.CodeAccessDenied, agentvfs.CodeConflict,
		agentvfs.CodeIsDirectory, agentvfs.CodeBinaryFile, agentvfs.CodeTimeout, agentvfs.CodeInternalError,
	}
	var reasons []string
	for n := int32(1); ; n++ {
		name, ok := pb.ErrorReason_name[n]
		if !ok {
			break
		}
		reasons = append(reasons, strings.TrimPrefix(name, "ERROR_REASON_"))
	}
	if strings.Join(codes, " ") != strings.Join(reasons, " ") {
		t.Fatalf("codes %v, reasons %v", codes, reasons)
	}
}

// TestErrorsAreGoErrors: each reason's *Error is the Go error it stands
// for, through errors.Is and errors.As, and nothing else.
func TestErrorsAreGoErrors(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, startServer(t, ""), "native")
	w, err := c.Filesystem.Write(ctx, &pb.WriteRequest{Path: "/f.txt", Content: "1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Filesystem.Read(ctx, &pb.ReadRequest{Path: "/missing"})
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist) || errors.Is(err, context.Canceled) {
		t.Fatalf("NOT_FOUND: want fs.ErrNotExist alone, got %v", err)
	}
	_, err = c.Filesystem.Write(ctx, &pb.WriteRequest{Path: "/f.txt", Content: "2", CreateOnly: true})
	if !errors.Is(err, fs.ErrExist) || agentvfs.CodeOf(err) != agentvfs.CodeConflict {
		t.Fatalf("create-only: want fs.ErrExist, got %v", err)
	}
	stale := w.GetVersion() + 5
	_, err = c.Filesystem.Write(ctx, &pb.WriteRequest{Path: "/f.txt", Content: "3", IfVersion: &stale})
	var conflict *agentvfs.ConflictError
	if !errors.As(err, &conflict) || *conflict != (agentvfs.ConflictError{Path: "/f.txt", Expected: stale, Actual: w.GetVersion()}) || errors.Is(err, fs.ErrExist) {
		t.Fatalf("stale if_version: want a *ConflictError with the versions, got %v", err)
	}
	_, err = c.Filesystem.Read(ctx, &pb.ReadRequest{Path: "/"})
	if !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("a directory read: want syscall.EISDIR, got %v", err)
	}
	_, err = c.Filesystem.ListInfo(ctx, &pb.ListInfoRequest{Path: "/f.txt"})
	if !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("a file listed: want syscall.ENOTDIR, got %v", err)
	}
	_, err = c.Filesystem.Read(ctx, &pb.ReadRequest{Path: "/f.txt", Offset: 9})
	var e *agentvfs.Error
	if !errors.As(err, &e) || errors.Unwrap(e) != nil {
		t.Fatalf("INVALID_PARAM: want an *Error wrapping nothing, got %v", err)
	}
}
