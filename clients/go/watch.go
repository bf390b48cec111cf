package agentvfs

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"
	"time"

	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultWatchRetries is how many reconnects in a row a Watch makes before
// it gives up, unless WatchOptions.MaxRetries says otherwise.
const DefaultWatchRetries = 10

// Reconnect delays of a Watch: the first, doubling up to the last.
const (
	watchFirstDelay = 100 * time.Millisecond
	watchMaxDelay   = 5 * time.Second
)

// WatchOptions say where a Watch starts, whether it ends, and how often it
// reconnects.
type WatchOptions struct {
	// Cursor resumes exactly after this cursor (a ChangeEvent's, or
	// Watch.Cursor of an earlier Watch): no change skipped, none repeated.
	Cursor string
	// FromNow starts at the head: only changes committed after the call.
	// With neither Cursor nor FromNow, the Watch starts at the oldest change
	// the server still keeps. Giving both is INVALID_PARAM.
	FromNow bool
	// StopAtHead ends the Watch once it has caught up, instead of following
	// new changes.
	StopAtHead bool
	// MaxRetries is how many reconnects in a row may fail with UNAVAILABLE
	// before All yields the error: 0 means DefaultWatchRetries, a negative
	// value never reconnects. The count starts over whenever the server
	// answers.
	MaxRetries int
}

// Watch is a Filesystem/Watch to follow that survives dropped connections
// and server restarts: range over All for the change events in commit order;
// Cursor is where it stands, to persist and resume from later.
type Watch struct {
	c    *Client
	path string
	opts WatchOptions

	mu     sync.Mutex
	cursor string
}

// Watch streams the changes under path (a directory or a file; "" is "/").
// When the call fails with UNAVAILABLE (the connection dropped, the server
// restarted), it calls again from the last cursor it received, after
// 100 ms, 200 ms, ... up to 5 s, so the loop sees each change exactly once.
// FAILED_PRECONDITION (an expired cursor), INVALID_PARAM, ACCESS_DENIED and
// every other error end the loop. A FromNow Watch that has received nothing
// yet starts from now again when it reconnects.
//
//	w := c.Watch("/memories", agentvfs.WatchOptions{Cursor: saved})
//	for e, err := range w.All(ctx) {
//		if err != nil { ... }
//		fmt.Println(e.GetKind(), e.GetPath())
//		saved = w.Cursor()
//	}
func (c *Client) Watch(path string, opts WatchOptions) *Watch {
	return &Watch{c: c, path: path, opts: opts, cursor: opts.Cursor}
}

// Cursor resumes after the last event All yielded (set before the event is
// yielded), or further when the server passed over changes the caller may
// not see; it is opts.Cursor before any. Safe to call from any goroutine.
func (w *Watch) Cursor() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cursor
}

func (w *Watch) setCursor(cursor string) {
	w.mu.Lock()
	w.cursor = cursor
	w.mu.Unlock()
}

// errStopped: the loop over All broke.
var errStopped = errors.New("agentvfs: watch loop stopped")

// All yields every change event in commit order under ctx, then stops (only
// with StopAtHead); a failure is yielded once as (nil, err). A later loop
// over All resumes from Cursor. Breaking out of the loop or cancelling ctx
// ends the call on the server (a cancelled ctx ends the loop with an error
// for which errors.Is(err, context.Canceled)).
func (w *Watch) All(ctx context.Context) iter.Seq2[*pb.ChangeEvent, error] {
	return func(yield func(*pb.ChangeEvent, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		maxRetries := w.opts.MaxRetries
		if maxRetries == 0 {
			maxRetries = DefaultWatchRetries
		}
		for failures := 0; ; {
			err := w.follow(ctx, yield, &failures)
			if err == nil || errors.Is(err, errStopped) {
				return
			}
			var e *Error
			if ctx.Err() != nil || !errors.As(err, &e) || e.Status != codes.Unavailable || failures >= maxRetries {
				yield(nil, err)
				return
			}
			failures++
			select {
			case <-time.After(watchDelay(failures)):
			case <-ctx.Done():
				yield(nil, wrapError(status.FromContextError(ctx.Err()).Err()))
				return
			}
		}
	}
}

// watchDelay is the wait before reconnect number failures (1, 2, ...).
func watchDelay(failures int) time.Duration {
	delay := watchFirstDelay
	for ; failures > 1 && delay < watchMaxDelay; failures-- {
		delay *= 2
	}
	return min(delay, watchMaxDelay)
}

// follow makes one call and yields its events; nil when the stream ended
// normally. Once the server answered, *failures starts over.
func (w *Watch) follow(ctx context.Context, yield func(*pb.ChangeEvent, error) bool, failures *int) error {
	req := &pb.WatchRequest{Path: w.path, Cursor: w.Cursor(), StopAtHead: w.opts.StopAtHead}
	if req.Cursor == w.opts.Cursor {
		// Nothing received yet: start where the caller asked.
		req.FromNow = w.opts.FromNow
	}
	stream, err := w.c.Filesystem.Watch(ctx, req)
	if err != nil {
		return err
	}
	// Headers without an error: the server took the call.
	if md, err := stream.Header(); err == nil && md != nil {
		*failures = 0
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		*failures = 0
		for _, event := range msg.GetEvents() {
			if err := ctx.Err(); err != nil {
				return wrapError(status.FromContextError(err).Err())
			}
			w.setCursor(event.GetCursor())
			if !yield(event, nil) {
				return errStopped
			}
		}
		w.setCursor(msg.GetCursor())
	}
}
