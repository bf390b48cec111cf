// Package agentvfs is the Go client of agentvfs, the gRPC file system for AI
// agents: a thin layer over the generated stubs (package agentvfsv1 in gen/).
//
// NewClient makes a client of an address, a bearer token and a session
// (connecting lazily, as grpc.NewClient); every RPC of every service
// (Filesystem, Tools, Access) is reachable through the typed stubs
// c.Filesystem, c.Tools and c.Access, whose errors are *Error carrying the
// envelope code and wrapping Go's own errors (errors.Is(err, fs.ErrNotExist),
// fs.ErrExist, fs.ErrPermission, syscall.EISDIR, syscall.ENOTDIR; see Error)
// or a *ConflictError with the versions (errors.As). Grep and Glob are Go
// iterators that stop the search when the loop breaks or the context is
// cancelled; Watch is an iterator of the changes under a path that reconnects
// by itself (from its last cursor) when the connection drops or the server
// restarts; both take their context when the loop starts (All). Upload and
// Download move files of any size in chunks (DownloadVersion: a retained
// version). Commit applies a changeset, several operations of one mount
// (WriteOp, EditOp, MultiEditOp, DeleteOp, MoveOp) all or nothing; the
// *Error of a failing one names it (OperationIndex). Options.Label or
// WithLabel labels the changes calls make; Rewind undoes the changes of one
// session, handle, label or changeset (ByLabel, ...), or all since a cursor,
// as one changeset. Branches: CreateBranch forks a directory, Options.Branch
// or WithBranch works in it, DiffBranch, MergeBranch and DiscardBranch
// (docs/branches.md).
//
//	c, err := agentvfs.NewClient("localhost:50051", agentvfs.Options{Session: "demo"})
//	if err != nil { ... }
//	defer c.Close()
//	w, err := c.Filesystem.Write(ctx, &pb.WriteRequest{Path: "/notes/a.md", Content: "hi\n", IfVersion: &seen})
//	var conflict *agentvfs.ConflictError
//	if errors.As(err, &conflict) { ... } // conflict.Expected, conflict.Actual
//	_, err = c.Filesystem.Read(ctx, &pb.ReadRequest{Path: "/missing"})
//	if errors.Is(err, fs.ErrNotExist) { ... }
//	// Optional request fields are pointers: IfVersion applies to the source.
//	v := w.GetVersion()
//	_, err = c.Filesystem.Move(ctx, &pb.MoveRequest{Source: "/notes/a.md", Destination: "/archive/a.md", IfVersion: &v})
//	// Follow the changes from a saved cursor ("" the first time: from the
//	// oldest change kept); persist watch.Cursor() to resume later.
//	watch := c.Watch("/notes", agentvfs.WatchOptions{Cursor: saved})
//	for e, err := range watch.All(ctx) {
//		if err != nil { ... } // an expired cursor: FAILED_PRECONDITION, Metadata["oldest_cursor"]
//		fmt.Println(e.GetKind(), e.GetPath(), e.GetVersion())
//		saved = watch.Cursor()
//	}
package agentvfs

import (
	"context"
	"fmt"

	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// Metadata keys the server reads (see the README's "Clients" section).
const (
	SessionHeader   = "x-agentvfs-session"
	NamespaceHeader = "x-agentvfs-namespace"
	LabelHeader     = "x-agentvfs-label"
	BranchHeader    = "x-agentvfs-branch"
)

// maxMessageBytes lifts grpc-go's 4 MiB receive limit: the server caps its
// own messages (search batches at 256 KiB, download chunks), but a Read of a
// large text file is one message.
const maxMessageBytes = 256 << 20

// Options say who is calling and how to connect.
type Options struct {
	// Token is the bearer token of the principal; empty sends none (the
	// server's default configuration needs none).
	Token string
	// Session scopes the State tier; empty means the server's "default".
	Session string
	// Namespace narrows the Store tier for a principal configured without one.
	Namespace string
	// Label is kept with every change the client's calls make (a turn or
	// task id that Watch, history and Rewind can name): 1-128 of letters,
	// digits and -_.@+:~/#= (else INVALID_PARAM); empty sends none.
	// WithLabel overrides it for one call.
	Label string
	// Branch is the branch every call works in (CreateBranch,
	// docs/branches.md); empty works on the base. WithBranch overrides it
	// for one call.
	Branch string
	// DialOptions are added after the defaults (plaintext, large messages),
	// e.g. grpc.WithTransportCredentials for TLS.
	DialOptions []grpc.DialOption
}

// Client is a connection to an agentvfs server. It is safe for concurrent use.
type Client struct {
	conn *grpc.ClientConn
	// Filesystem is the backend protocol: ListInfo, Stat, Read, Write, Edit,
	// Delete, Move (rename a file or a tree within one mount), ...
	Filesystem pb.FilesystemClient
	// Tools are the LLM tools answering in the standard envelope.
	Tools pb.ToolsClient
	// Access mints and revokes handles and describes grants.
	Access pb.AccessClient
}

// NewClient makes a client of the server at addr ("localhost:50051"). Like
// grpc.NewClient, it connects lazily: the first call reports a server that
// cannot be reached.
func NewClient(addr string, opts Options) (*Client, error) {
	md := metadata.MD{}
	if opts.Token != "" {
		md.Set("authorization", "Bearer "+opts.Token)
	}
	if opts.Session != "" {
		md.Set(SessionHeader, opts.Session)
	}
	if opts.Namespace != "" {
		md.Set(NamespaceHeader, opts.Namespace)
	}
	if opts.Label != "" {
		md.Set(LabelHeader, opts.Label)
	}
	if opts.Branch != "" {
		md.Set(BranchHeader, opts.Branch)
	}
	dial := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes)),
		grpc.WithChainUnaryInterceptor(unaryInterceptor(md)),
		grpc.WithChainStreamInterceptor(streamInterceptor(md)),
	}, opts.DialOptions...)
	conn, err := grpc.NewClient(addr, dial...)
	if err != nil {
		return nil, fmt.Errorf("agentvfs: new client of %s: %w", addr, err)
	}
	return &Client{
		conn:       conn,
		Filesystem: pb.NewFilesystemClient(conn),
		Tools:      pb.NewToolsClient(conn),
		Access:     pb.NewAccessClient(conn),
	}, nil
}

// Conn is the underlying connection (with the metadata and error
// interceptors), e.g. for grpc.ClientConn.Invoke.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// WithLabel labels the changes of the calls made with the returned context
// (x-agentvfs-label), in place of the client's Options.Label:
//
//	res, err := c.Commit(agentvfs.WithLabel(ctx, "turn-7"), ops...)
//	...
//	_, err = c.Rewind(ctx, "/src", agentvfs.ByLabel("turn-7"))
func WithLabel(ctx context.Context, label string) context.Context {
	return withHeader(ctx, LabelHeader, label)
}

// WithBranch makes the calls made with the returned context work in the
// branch name (x-agentvfs-branch), in place of the client's Options.Branch:
//
//	_, err := c.Filesystem.Write(agentvfs.WithBranch(ctx, "try-1"), &pb.WriteRequest{...})
//	res, err := c.MergeBranch(ctx, "try-1")
func WithBranch(ctx context.Context, name string) context.Context {
	return withHeader(ctx, BranchHeader, name)
}

// withHeader sets the metadata key of the calls made with the returned
// context.
func withHeader(ctx context.Context, key, value string) context.Context {
	out, _ := metadata.FromOutgoingContext(ctx)
	out = out.Copy()
	out.Set(key, value)
	return metadata.NewOutgoingContext(ctx, out)
}

// withMetadata adds the client's metadata to the call's; a key the call's
// context sets (WithLabel, metadata.AppendToOutgoingContext) wins.
func withMetadata(ctx context.Context, md metadata.MD) context.Context {
	if len(md) == 0 {
		return ctx
	}
	out, _ := metadata.FromOutgoingContext(ctx)
	merged := md.Copy()
	for k := range out {
		delete(merged, k)
	}
	return metadata.NewOutgoingContext(ctx, metadata.Join(merged, out))
}

func unaryInterceptor(md metadata.MD) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return wrapError(invoker(withMetadata(ctx, md), method, req, reply, cc, opts...))
	}
}

func streamInterceptor(md metadata.MD) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(withMetadata(ctx, md), desc, cc, method, opts...)
		if err != nil {
			return nil, wrapError(err)
		}
		return errorStream{s}, nil
	}
}

// errorStream turns the errors of a stream into *Error (io.EOF stays io.EOF).
type errorStream struct{ grpc.ClientStream }

func (s errorStream) SendMsg(m any) error { return wrapError(s.ClientStream.SendMsg(m)) }
func (s errorStream) RecvMsg(m any) error { return wrapError(s.ClientStream.RecvMsg(m)) }
func (s errorStream) CloseSend() error    { return wrapError(s.ClientStream.CloseSend()) }
