package agentvfs

import (
	"context"
	"errors"
	"io"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Envelope codes: the google.rpc.ErrorInfo reason of every server error, the
// same codes the Tools envelope uses.
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

// Error is a failed call: its gRPC status and, when the server sent one, the
// envelope code of its google.rpc.ErrorInfo.
type Error struct {
	// Code is the envelope code (CodeNotFound, ...); empty when the error did
	// not come from the agentvfs server (cancelled, unreachable, ...).
	Code string
	// Status is the gRPC status code (codes.NotFound, codes.Canceled, ...).
	Status codes.Code
	// Message is the server's explanation.
	Message string
	// Metadata is ErrorInfo.metadata ("path", "expected_version", ...).
	Metadata map[string]string
	status   *status.Status
}

func (e *Error) Error() string {
	if e.Code == "" {
		return "agentvfs: " + e.Status.String() + ": " + e.Message
	}
	return "agentvfs: " + e.Code + ": " + e.Message
}

// GRPCStatus lets status.FromError and status.Code see the original status.
func (e *Error) GRPCStatus() *status.Status { return e.status }

// Is makes errors.Is(err, context.Canceled) and
// errors.Is(err, context.DeadlineExceeded) hold for a call the caller's
// context ended.
func (e *Error) Is(target error) bool {
	switch target {
	case context.Canceled:
		return e.Status == codes.Canceled
	case context.DeadlineExceeded:
		return e.Status == codes.DeadlineExceeded && e.Code == ""
	}
	return false
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
		}
	}
	return out
}
