package agentvfs

import (
	"context"
	"errors"
	"io"
	"iter"

	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
	"google.golang.org/grpc/status"
)

// ChunkBytes is the size of each Upload message: large enough that a file
// costs few messages, well under gRPC's 4 MiB default message limit.
const ChunkBytes = 1 << 20

// Search is a Grep or Glob to run: range over All for the results in path
// order; Summary is set once All has run to the end.
type Search[T any] struct {
	start   func(ctx context.Context) (recv func() ([]T, *pb.SearchSummary, error), err error)
	summary *pb.SearchSummary
}

// All yields every result, then stops; a failure is yielded once as
// (zero, err). The search starts when the loop does, under ctx (each loop
// over All runs it again); breaking out of the loop or cancelling ctx stops
// it on the server too (a cancelled ctx ends the loop with an error for which
// errors.Is(err, context.Canceled)).
func (s *Search[T]) All(ctx context.Context) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		recv, err := s.start(ctx)
		if err != nil {
			yield(zero, err)
			return
		}
		for {
			items, summary, err := recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = errors.New("agentvfs: search stream ended without a summary")
				}
				yield(zero, err)
				return
			}
			for _, item := range items {
				// A batch holds thousands of results: check the context
				// between them so a cancel stops the loop at once.
				if err := ctx.Err(); err != nil {
					yield(zero, wrapError(status.FromContextError(err).Err()))
					return
				}
				if !yield(item, nil) {
					return
				}
			}
			if summary != nil {
				s.summary = summary
				return
			}
		}
	}
}

// Summary is the search's final message (counts, elapsed time, why it
// stopped early), or nil before All finished.
func (s *Search[T]) Summary() *pb.SearchSummary { return s.summary }

// Grep searches file contents; the matches stream in path order.
//
//	s := c.Grep(&pb.GrepRequest{Pattern: "TODO", Path: "/src"})
//	for m, err := range s.All(ctx) { ... }
func (c *Client) Grep(req *pb.GrepRequest) *Search[*pb.GrepMatch] {
	return &Search[*pb.GrepMatch]{start: func(ctx context.Context) (func() ([]*pb.GrepMatch, *pb.SearchSummary, error), error) {
		stream, err := c.Filesystem.Grep(ctx, req)
		if err != nil {
			return nil, err
		}
		return func() ([]*pb.GrepMatch, *pb.SearchSummary, error) {
			msg, err := stream.Recv()
			return msg.GetBatch().GetMatches(), msg.GetSummary(), err
		}, nil
	}}
}

// Glob finds paths matching a glob; the entries stream in path order.
func (c *Client) Glob(req *pb.GlobRequest) *Search[*pb.FileInfo] {
	return &Search[*pb.FileInfo]{start: func(ctx context.Context) (func() ([]*pb.FileInfo, *pb.SearchSummary, error), error) {
		stream, err := c.Filesystem.Glob(ctx, req)
		if err != nil {
			return nil, err
		}
		return func() ([]*pb.FileInfo, *pb.SearchSummary, error) {
			msg, err := stream.Recv()
			return msg.GetBatch().GetEntries(), msg.GetSummary(), err
		}, nil
	}}
}

// Upload writes everything r yields to the file the header names, in
// ChunkBytes messages, without holding the whole file in memory.
func (c *Client) Upload(ctx context.Context, header *pb.WriteBytesHeader, r io.Reader) (*pb.WriteBytesResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream if a send or read fails halfway
	stream, err := c.Filesystem.WriteBytes(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&pb.WriteBytesRequest{Kind: &pb.WriteBytesRequest_Header{Header: header}}); err != nil {
		return nil, uploadError(stream, err)
	}
	buf := make([]byte, ChunkBytes)
	for {
		n, readErr := io.ReadFull(r, buf)
		if n > 0 {
			chunk := &pb.WriteBytesRequest{Kind: &pb.WriteBytesRequest_Data{Data: buf[:n]}}
			if err := stream.Send(chunk); err != nil {
				return nil, uploadError(stream, err)
			}
		}
		if errors.Is(readErr, io.EOF) || errors.Is(readErr, io.ErrUnexpectedEOF) {
			break
		}
		if readErr != nil {
			return nil, readErr
		}
	}
	return stream.CloseAndRecv()
}

// uploadError: a Send fails with io.EOF when the server already answered
// (e.g. CONFLICT after the header); its status is what CloseAndRecv returns.
func uploadError(stream pb.Filesystem_WriteBytesClient, err error) error {
	if errors.Is(err, io.EOF) {
		_, err = stream.CloseAndRecv()
	}
	return err
}

// Download writes the file at path to w as its chunks arrive and returns its
// metadata.
func (c *Client) Download(ctx context.Context, path string, w io.Writer) (*pb.FileInfo, error) {
	return c.download(ctx, &pb.ReadBytesRequest{Path: path}, w)
}

// DownloadVersion is Download of a retained version of the file (see
// Filesystem.ListVersions); NOT_FOUND when it is not retained.
func (c *Client) DownloadVersion(ctx context.Context, path string, version uint64, w io.Writer) (*pb.FileInfo, error) {
	return c.download(ctx, &pb.ReadBytesRequest{Path: path, Version: &version}, w)
}

func (c *Client) download(ctx context.Context, req *pb.ReadBytesRequest, w io.Writer) (*pb.FileInfo, error) {
	stream, err := c.Filesystem.ReadBytes(ctx, req)
	if err != nil {
		return nil, err
	}
	var info *pb.FileInfo
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return info, nil
		}
		if err != nil {
			return nil, err
		}
		if info == nil {
			info = msg.GetInfo()
		}
		if _, err := w.Write(msg.GetData()); err != nil {
			return nil, err
		}
	}
}
