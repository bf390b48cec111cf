package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	agentvfs "github.com/agentvfs/agentvfs/clients/go"
)

// options are the suite's settings, from flags and the environment.
type options struct {
	bin, versitygw, out string
	// ops is how many operations a run makes; duration, when set, runs
	// for that long instead; maxDuration stops a run that is slower.
	ops                   int
	duration, maxDuration time.Duration
	clients               int
	seed                  int64
	callTimeout           time.Duration
	checkTimeout          time.Duration
	keep                  bool
	before                time.Duration
	pairs                 bool
	noCommits             bool
	tornCommits           bool
}

// paths are the files every run works on.
var paths = []string{mountPrefix + "/p0", mountPrefix + "/p1", mountPrefix + "/p2", mountPrefix + "/p3"}

// result is what one run did and found.
type result struct {
	spec runSpec
	// wanted is the operations asked for (0 in a run of a set duration).
	wanted    int
	ops       int
	unknown   int
	kills     int
	elapsed   time.Duration
	check     verdict
	faults    []string
	artifacts string
	err       error
}

// failed reports whether the run failed: an error, an answer the contract
// never gives, or a history not shown linearizable.
func (r result) failed() bool {
	return r.err != nil || len(r.check.breaches) > 0 || !r.check.linearizable()
}

// execRun runs one spec: starts its cluster, runs the clients with a kill
// a third of the way in, then checks the history.
func execRun(spec runSpec, opt options) result {
	res := result{spec: spec}
	if spec.maxOps > 0 && opt.ops > spec.maxOps {
		opt.ops = spec.maxOps
	}
	if opt.duration == 0 {
		res.wanted = opt.ops
	}
	dir, err := os.MkdirTemp("", "agentvfs-lin-"+spec.name+"-")
	if err != nil {
		res.err = err
		return res
	}
	defer os.RemoveAll(dir)
	w := &workload{paths: paths, pairs: opt.pairs || spec.pairs, noCommits: opt.noCommits, tornCommits: opt.tornCommits, grep: spec.grep}
	c, err := startCluster(spec, opt, dir)
	// The clock starts once the servers answer.
	h := newHistory()
	if err == nil && spec.branch {
		w.branch = branchName
		err = seedBranch(c, w, h, opt.callTimeout)
	}
	if err == nil {
		res.kills, err = drive(c, w, h, opt, !spec.volatile)
	}
	res.elapsed = time.Duration(h.now())
	c.stop()
	for i, p := range c.proxies {
		res.faults = append(res.faults, fmt.Sprintf("proxy %d: %s", i, p.stats()))
		h.event(i, "proxy: "+p.stats())
	}
	res.ops = h.count()
	res.unknown = h.unknown()
	res.err = err
	if err == nil {
		res.check = check(w, h, opt.checkTimeout)
	}
	if res.failed() || opt.keep {
		res.artifacts, err = saveArtifacts(spec, opt, w, h, res.check, dir)
		if err != nil && res.err == nil {
			res.err = err
		}
	}
	return res
}

// drive runs the clients until the run has its operations (or its
// duration), killing one server with SIGKILL about a third of the way in
// and restarting it when kill is set; it returns how many kills it made.
func drive(c *cluster, w *workload, h *History, opt options, kill bool) (int, error) {
	rng := rand.New(rand.NewPCG(uint64(opt.seed), 1<<32)) // a stream no client uses
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	for i := range opt.clients {
		cl := newClient(i, w, opt.seed)
		n := c.nodes[i%len(c.nodes)]
		wg.Go(func() { runClient(ctx, cl, n, w, h, opt.callTimeout) })
	}
	done := func() bool {
		t := time.Duration(h.now())
		if opt.duration > 0 {
			return t >= opt.duration
		}
		return h.count() >= opt.ops || t >= opt.maxDuration
	}
	// The kill comes about a third of the way in: between 28% and 38%.
	at := 0.28 + 0.1*rng.Float64()
	third := func() bool {
		if opt.duration > 0 {
			return time.Duration(h.now()) >= time.Duration(at*float64(opt.duration))
		}
		return h.count() >= int(at*float64(opt.ops))
	}
	kills := 0
	var err error
	for !done() {
		if kill && kills == 0 && third() {
			victim := c.nodes[rng.IntN(len(c.nodes))]
			pause := 200*time.Millisecond + time.Duration(rng.Int64N(int64(500*time.Millisecond)))
			kills++
			if err = victim.crash(h, pause); err != nil {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()
	return kills, err
}

// runClient runs one client's operations on node n until ctx ends; each
// call gets callTimeout and is not cut when the run ends.
func runClient(ctx context.Context, cl *client, n *node, w *workload, h *History, callTimeout time.Duration) {
	for ctx.Err() == nil {
		conn, gen, err := n.current(ctx)
		if err != nil {
			return
		}
		in := cl.next()
		call, cancel := context.WithTimeout(context.Background(), callTimeout)
		if w.branch != "" {
			call = agentvfs.WithBranch(call, w.branch)
		}
		start := h.now()
		var out Output
		if w.tornCommits && in.Kind == KindCommit {
			out = executeTorn(call, conn, w.paths, in)
		} else {
			out = execute(call, conn, w.paths, in)
		}
		end := h.now()
		cancel()
		h.add(Record{Client: cl.id, Server: n.index, Generation: gen, Input: in, Output: out, Call: start, Return: end})
		cl.observe(in, out)
	}
}
