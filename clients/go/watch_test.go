package agentvfs_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentvfs "github.com/agentvfs/agentvfs/clients/go"
	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
	"google.golang.org/grpc/codes"
)

// catchUp runs a Watch with StopAtHead to its end: its events and its cursor.
func catchUp(t *testing.T, c *agentvfs.Client, path string, opts agentvfs.WatchOptions) ([]*pb.ChangeEvent, string, error) {
	t.Helper()
	opts.StopAtHead = true
	w := c.Watch(path, opts)
	var events []*pb.ChangeEvent
	for e, err := range w.All(context.Background()) {
		if err != nil {
			return events, w.Cursor(), err
		}
		events = append(events, e)
	}
	return events, w.Cursor(), nil
}

// summary is "KIND path operation" per event.
func summary(events []*pb.ChangeEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = fmt.Sprintf("%s %s %s", strings.TrimPrefix(e.GetKind().String(), "CHANGE_KIND_"), e.GetPath(), e.GetOperation())
	}
	return out
}

func mustWrite(t *testing.T, c *agentvfs.Client, path, content string) *pb.WriteResponse {
	t.Helper()
	w, err := c.Filesystem.Write(context.Background(), &pb.WriteRequest{Path: path, Content: content})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestWatchSeesChangesInOrder: a Watch yields a write, an edit and a
// delete in commit order with their versions; with StopAtHead the loop
// ends by itself; a following Watch sees a change made after it started.
func TestWatchSeesChangesInOrder(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, startServer(t, ""), "watch-order")
	w := mustWrite(t, c, "/w/a.md", "alpha\n")
	e, err := c.Filesystem.Edit(ctx, &pb.EditRequest{Path: "/w/a.md", OldString: "alpha", NewString: "beta"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Filesystem.Delete(ctx, &pb.DeleteRequest{Path: "/w/a.md"}); err != nil {
		t.Fatal(err)
	}
	events, cursor, err := catchUp(t, c, "/w", agentvfs.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CREATED /w/a.md write", "MODIFIED /w/a.md edit", "DELETED /w/a.md delete"}
	if got := summary(events); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events: got %v, want %v", got, want)
	}
	if events[0].GetVersion() != w.GetVersion() || events[1].GetVersion() != e.GetVersion() || events[2].GetVersion() <= e.GetVersion() {
		t.Fatalf("versions: %v", events)
	}
	if cursor == "" || cursor != events[2].GetCursor() {
		t.Fatalf("the cursor after the watch: %q, last event's %q", cursor, events[2].GetCursor())
	}

	// Following: the loop waits for the next change and yields it.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	follow := c.Watch("/w", agentvfs.WatchOptions{FromNow: true})
	got := make(chan string, 1)
	go func() {
		for e, err := range follow.All(ctx) {
			if err != nil {
				got <- err.Error()
				return
			}
			got <- e.GetPath()
			return
		}
	}()
	// FromNow starts when the call does: write until the watcher sees one.
	for i := 0; i < 100; i++ {
		mustWrite(t, c, fmt.Sprintf("/w/later-%d.md", i), "x")
		select {
		case path := <-got:
			if !strings.HasPrefix(path, "/w/later-") {
				t.Fatalf("following watch: %s", path)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatal("the following watch saw none of 100 writes")
}

// TestWatchResumesFromASavedCursor: a Watch from a saved cursor yields
// exactly the changes after it; after a loop broken early, Cursor resumes
// right after the last event yielded.
func TestWatchResumesFromASavedCursor(t *testing.T) {
	c := newClient(t, startServer(t, ""), "watch-resume")
	mustWrite(t, c, "/w/1", "1")
	mustWrite(t, c, "/w/2", "2")
	_, saved, err := catchUp(t, c, "/w", agentvfs.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"3", "4", "5"} {
		mustWrite(t, c, "/w/"+name, name)
	}
	events, _, err := catchUp(t, c, "/w", agentvfs.WatchOptions{Cursor: saved})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CREATED /w/3 write", "CREATED /w/4 write", "CREATED /w/5 write"}
	if got := summary(events); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("from the saved cursor: got %v, want %v", got, want)
	}

	w := c.Watch("/w", agentvfs.WatchOptions{Cursor: saved, StopAtHead: true})
	for e, err := range w.All(context.Background()) {
		if err != nil || e.GetPath() != "/w/3" {
			t.Fatalf("first event: %v %v", e, err)
		}
		break
	}
	rest, _, err := catchUp(t, c, "/w", agentvfs.WatchOptions{Cursor: w.Cursor()})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(rest); fmt.Sprint(got) != fmt.Sprint(want[1:]) {
		t.Fatalf("after a broken loop: got %v, want %v", got, want[1:])
	}
}

// TestWatchRefusesAnExpiredCursorWithoutRetrying: a cursor older than the
// change log keeps is FAILED_PRECONDITION (INVALID_PARAM) naming the
// oldest cursor, which resumes; it and a cursor with FromNow fail at once,
// never retried.
func TestWatchRefusesAnExpiredCursorWithoutRetrying(t *testing.T) {
	c := newClient(t, startServer(t, "[[mount]]\nprefix = \"/\"\ntier = \"state\"\nchange_log = 3\n"), "watch-expired")
	mustWrite(t, c, "/a", "1")
	_, saved, err := catchUp(t, c, "/", agentvfs.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"b", "c", "d", "e", "f"} {
		mustWrite(t, c, "/"+name, "x")
	}
	started := time.Now()
	_, _, err = catchUp(t, c, "/", agentvfs.WatchOptions{Cursor: saved})
	var e *agentvfs.Error
	if !errors.As(err, &e) || e.Status != codes.FailedPrecondition || e.Code != agentvfs.CodeInvalidParam {
		t.Fatalf("expired cursor: want FAILED_PRECONDITION/INVALID_PARAM, got %v", err)
	}
	oldest := e.Metadata["oldest_cursor"]
	if oldest == "" || !strings.Contains(e.Message, "the oldest cursor still available is "+oldest) {
		t.Fatalf("expired cursor: %q, metadata %v", e.Message, e.Metadata)
	}
	events, _, err := catchUp(t, c, "/", agentvfs.WatchOptions{Cursor: oldest})
	if got := summary(events); err != nil || fmt.Sprint(got) != "[CREATED /d write CREATED /e write CREATED /f write]" {
		t.Fatalf("from the oldest cursor: %v %v", got, err)
	}
	_, _, err = catchUp(t, c, "/", agentvfs.WatchOptions{Cursor: oldest, FromNow: true})
	if !errors.As(err, &e) || e.Status != codes.InvalidArgument {
		t.Fatalf("cursor and FromNow: want INVALID_ARGUMENT, got %v", err)
	}
	// Retried, the two failures would have taken over 25 s of backoff.
	if elapsed := time.Since(started); elapsed > 5*time.Second {
		t.Fatalf("the failures took %v: were they retried?", elapsed)
	}
}

// TestWatchResumesAcrossAServerRestart: a watcher follows a Store mount;
// the server is killed (SIGKILL) and a new one started on the same address
// and data directory; the same loop, reconnecting by itself, yields exactly
// the writes made after its last event, each once, in order.
func TestWatchResumesAcrossAServerRestart(t *testing.T) {
	dir := t.TempDir()
	config := fmt.Sprintf("[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n"+
		"[[mount]]\nprefix = \"/memories\"\ntier = \"store\"\npath = %q\n", filepath.Join(dir, "store"))
	first := spawnServer(t, dir, "127.0.0.1:0", config)
	watcher := newClient(t, first.addr, "watch-restart")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := watcher.Watch("/memories", agentvfs.WatchOptions{})
	seen := make(chan *pb.ChangeEvent, 16)
	done := make(chan error, 1)
	go func() {
		for e, err := range w.All(ctx) {
			if err != nil {
				done <- err
				return
			}
			seen <- e
		}
		done <- errors.New("the watch ended")
	}()
	next := func(want string, version uint64) {
		t.Helper()
		select {
		case e := <-seen:
			if e.GetPath() != want || e.GetVersion() != version || e.GetKind() != pb.ChangeKind_CHANGE_KIND_CREATED {
				t.Fatalf("got %s v%d (%s), want %s v%d", e.GetPath(), e.GetVersion(), e.GetKind(), want, version)
			}
		case err := <-done:
			t.Fatalf("waiting for %s: %v", want, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s never came", want)
		}
	}

	before := newClient(t, first.addr, "watch-restart")
	for _, name := range []string{"m1", "m2"} {
		next("/memories/"+name, mustWrite(t, before, "/memories/"+name, name).GetVersion())
	}
	cursor := w.Cursor()
	first.kill()
	spawnServer(t, dir, first.addr, config)
	// A new client: the first one's connection is in gRPC's reconnect backoff.
	after := newClient(t, first.addr, "watch-restart")
	for _, name := range []string{"m3", "m4", "m5"} {
		next("/memories/"+name, mustWrite(t, after, "/memories/"+name, name).GetVersion())
	}
	select {
	case e := <-seen:
		t.Fatalf("an event too many: %v", e)
	case <-time.After(300 * time.Millisecond):
	}
	if w.Cursor() == cursor {
		t.Fatal("the cursor did not move after the restart")
	}
}
