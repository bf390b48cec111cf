package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	agentvfs "github.com/agentvfs/agentvfs/clients/go"
	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
)

// startTimeout bounds an agentvfs server's start, up to its first answer.
const startTimeout = 60 * time.Second

// node is one agentvfs server of a run: the process serving it now, a
// client connected to it, and its generation (how often it was
// restarted). Clients wait while it is down.
type node struct {
	index  int
	bin    string
	dir    string
	env    []string
	config string

	mu   sync.Mutex
	gen  int
	proc *process
	conn *agentvfs.Client
	// up is closed while the server answers; a fresh open channel while
	// it is being restarted.
	up chan struct{}
}

// startNode writes the server's configuration in dir and starts it.
func startNode(index int, bin, dir, config string, env []string) (*node, error) {
	n := &node{index: index, bin: bin, dir: dir, env: env, config: filepath.Join(dir, "agentvfs.toml")}
	if err := os.WriteFile(n.config, []byte(config), 0o644); err != nil {
		return nil, err
	}
	proc, conn, err := n.launch()
	if err != nil {
		return nil, err
	}
	n.proc, n.conn, n.up = proc, conn, make(chan struct{})
	close(n.up)
	return n, nil
}

// launch starts the server process and waits until it answers.
func (n *node) launch() (*process, *agentvfs.Client, error) {
	proc, stdout, err := spawn(n.bin, []string{"serve", "--config", n.config}, n.dir, n.env, filepath.Join(n.dir, "agentvfs.log"))
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*process, *agentvfs.Client, error) {
		proc.kill()
		return nil, nil, fmt.Errorf("agentvfs server %d (log %s): %w", n.index, filepath.Join(n.dir, "agentvfs.log"), err)
	}
	addr, err := listenLine(stdout, "agentvfs listening on ", startTimeout)
	if err != nil {
		return fail(err)
	}
	conn, err := agentvfs.NewClient(addr, agentvfs.Options{})
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		_, err := conn.Filesystem.Stat(ctx, &pb.StatRequest{Path: "/"})
		if err == nil {
			return proc, conn, nil
		}
		if ctx.Err() != nil {
			conn.Close()
			return fail(fmt.Errorf("no answer: %w", err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// current waits until the server is up and returns its client and
// generation.
func (n *node) current(ctx context.Context) (*agentvfs.Client, int, error) {
	n.mu.Lock()
	up := n.up
	n.mu.Unlock()
	select {
	case <-up:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.conn, n.gen, nil
}

// crash kills the server with SIGKILL, waits pause, and starts it again on
// the same configuration and data; the history gets the events and the
// outage that bounds the calls the killed process had in flight.
func (n *node) crash(h *History, pause time.Duration) error {
	n.mu.Lock()
	proc, conn, gen := n.proc, n.conn, n.gen
	// The signal goes first, so calls the clients have in flight meet it;
	// then no new call starts until the successor answers.
	killed := h.now()
	proc.signalKill()
	n.up = make(chan struct{})
	n.mu.Unlock()
	h.event(n.index, fmt.Sprintf("kill -9 (generation %d)", gen))
	<-proc.exited
	h.event(n.index, "exited")
	time.Sleep(pause)
	proc, fresh, err := n.launch()
	if err != nil {
		return err
	}
	ready := h.now()
	h.outage(n.index, gen, killed, ready)
	h.event(n.index, fmt.Sprintf("restarted, answering (generation %d)", gen+1))
	n.mu.Lock()
	n.proc, n.conn, n.gen = proc, fresh, gen+1
	close(n.up)
	n.mu.Unlock()
	conn.Close()
	return nil
}

// stop kills the server for good and closes its client.
func (n *node) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		n.proc.kill()
		n.conn.Close()
		n.proc = nil
	}
}
