package main

import (
	"context"
	"fmt"
	"time"
)

// branchName is the branch a branch run's clients work in.
const branchName = "lin"

// seedContents are what the base holds at each path when the branch is
// forked, so the branch's calls meet files it has not changed yet (read
// through to the base), files it deletes (whiteouts) and files it moves
// away, not only its own.
var seedContents = []string{"S a b", "S b c", "S c a", "S a c"}

// seedBranch writes a file at every path on the base through server 0,
// recording the writes in the history (they end before any client call
// starts, so the model takes them first), then forks mountPrefix into
// the branch w.branch that every client call of the run works in.
func seedBranch(c *cluster, w *workload, h *History, callTimeout time.Duration) error {
	n := c.nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	conn, gen, err := n.current(ctx)
	if err != nil {
		return err
	}
	// A client id no workload client has.
	seeder := -1
	for i := range w.paths {
		in := Input{Kind: KindWrite, Path: i, Content: seedContents[i%len(seedContents)]}
		start := h.now()
		out := execute(ctx, conn, w.paths, in)
		h.add(Record{Client: seeder, Server: n.index, Generation: gen, Input: in, Output: out, Call: start, Return: h.now()})
		if out.Code != "OK" {
			return fmt.Errorf("seeding %s on the base: %s %s", w.paths[i], out.Code, out.Message)
		}
	}
	if _, err := conn.CreateBranch(ctx, w.branch, mountPrefix); err != nil {
		return fmt.Errorf("forking %s into branch %q: %w", mountPrefix, w.branch, err)
	}
	return nil
}
