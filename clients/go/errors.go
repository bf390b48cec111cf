package agentvfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"syscall"

	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Envelope codes: the google.rpc.ErrorInfo reason of every server error, the
// same codes the Tools envelope uses. Each is a pb.ErrorReason without its
// ERROR_REASON_ prefix (proto/agentvfs/v1/errors.proto, which documents
// them); a test holds them to the enum.
const (
	CodeInvalidParam  = "INVALID_PARAM"
	CodeNotFound      = "NOT_FOUND"
	CodeAccessDenied  = "ACCESS_DENIED"
	CodeConflict      = "CONFLICT"
	CodeIsDirectory   = "IS_DIRECTORY"
	CodeBinaryFile    = "BINARY_FILE"
	CodeTimeout       = "TIMEOUT"
	CodeInternalError = "INTERNAL_ERROR"
)

// errorDomain is google.rpc.ErrorInfo.domain of the server's errors.
const errorDomain = "agentvfs"

// reasonPrefix starts every pb.ErrorReason name but not its wire spelling.
const reasonPrefix = "ERROR_REASON_"

// Error is a failed call: its gRPC status and, when the server sent one, the
// envelope code of its google.rpc.ErrorInfo. It wraps the Go error it stands
// for, so errors.Is and errors.As see through it:
//
//   - NOT_FOUND: fs.ErrNotExist;
//   - CONFLICT of a create-only write (gRPC ALREADY_EXISTS): fs.ErrExist;
//   - CONFLICT of a stale if_version (gRPC ABORTED): *ConflictError, with
//     the versions;
//   - ACCESS_DENIED: fs.ErrPermission;
//   - IS_DIRECTORY: syscall.EISDIR;
//   - INVALID_PARAM for a path below a file (gRPC FAILED_PRECONDITION with
//     metadata "path"): syscall.ENOTDIR;
//   - a call the caller's context ended: context.Canceled or
//     context.DeadlineExceeded.
type Error struct {
	// Code is the envelope code (CodeNotFound, ...); empty when the error did
	// not come from the agentvfs server (cancelled, unreachable, ...).
	Code string
	// Reason is Code as the enum of the contract; unspecified when Code is
	// empty (or new to this client).
	Reason pb.ErrorReason
	// Status is the gRPC status code (codes.NotFound, codes.Canceled, ...).
	Status codes.Code
	// Message is the server's explanation.
	Message string
	// Metadata is ErrorInfo.metadata ("path", "expected_version", ...).
	Metadata map[string]string
	status   *status.Status
	native   error
}

// Error is "agentvfs: CODE: message" (the gRPC code when there is no CODE).
func (e *Error) Error() string {
	if e.Code == "" {
		return "agentvfs: " + e.Status.String() + ": " + e.Message
	}
	return "agentvfs: " + e.Code + ": " + e.Message
}

// GRPCStatus lets status.FromError and status.Code see the original status.
func (e *Error) GRPCStatus() *status.Status { return e.status }

// Unwrap returns the Go error e stands for (see Error), or nil.
func (e *Error) Unwrap() error { return e.native }

// OperationIndex is the index (from 0) of the changeset operation that
// failed when e is the error of a Commit naming one (ErrorInfo metadata
// "operation_index"), else -1.
func (e *Error) OperationIndex() int {
	s, ok := e.Metadata["operation_index"]
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// ConflictError is a conditional write (if_version) that found another
// version of the file: CONFLICT with gRPC ABORTED. errors.As finds it in the
// *Error of such a call, to read the versions without parsing metadata.
type ConflictError struct {
	// Path is the file's path.
	Path string
	// Expected is the version the call expected (its if_version).
	Expected uint64
	// Actual is the file's version; 0 when it does not exist.
	Actual uint64
}

// Error names the path and both versions.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("version conflict on %s: expected version %d, found %d", e.Path, e.Expected, e.Actual)
}

// CodeOf returns the envelope code of err, or "" when err is nil or not an
// agentvfs server error.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// wrapError turns a gRPC status error into *Error; nil and io.EOF pass.
func wrapError(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	out := &Error{Status: st.Code(), Message: st.Message(), status: st}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errorDomain {
			out.Code, out.Metadata = info.GetReason(), info.GetMetadata()
			out.Reason = pb.ErrorReason(pb.ErrorReason_value[reasonPrefix+out.Code])
		}
	}
	out.native = native(out)
	return out
}

// native is the Go error e stands for, as the doc of Error lists them (the
// reasons' gRPC codes and metadata: proto/agentvfs/v1/errors.proto).
func native(e *Error) error {
	switch e.Reason {
	case pb.ErrorReason_ERROR_REASON_NOT_FOUND:
		return fs.ErrNotExist
	case pb.ErrorReason_ERROR_REASON_ACCESS_DENIED:
		return fs.ErrPermission
	case pb.ErrorReason_ERROR_REASON_IS_DIRECTORY:
		return syscall.EISDIR
	case pb.ErrorReason_ERROR_REASON_CONFLICT:
		if e.Status == codes.AlreadyExists {
			return fs.ErrExist
		}
		return &ConflictError{Path: e.Metadata["path"], Expected: version(e.Metadata["expected_version"]), Actual: version(e.Metadata["actual_version"])}
	case pb.ErrorReason_ERROR_REASON_INVALID_PARAM:
		if _, hasPath := e.Metadata["path"]; hasPath && e.Status == codes.FailedPrecondition {
			return syscall.ENOTDIR
		}
	case pb.ErrorReason_ERROR_REASON_UNSPECIFIED:
		if e.Status == codes.DeadlineExceeded {
			return context.DeadlineExceeded
		}
	}
	if e.Status == codes.Canceled {
		return context.Canceled
	}
	return nil
}

// version parses a version the server sent in metadata (0 when absent).
func version(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}
