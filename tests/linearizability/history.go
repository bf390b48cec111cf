package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Record is one operation of the history: who ran it where, what it asked
// and answered, and when it was called and returned, in nanoseconds on the
// run's one monotonic clock.
type Record struct {
	Client int `json:"client"`
	Server int `json:"server"`
	// Generation counts the restarts of Server before the call: the
	// process the call was sent to.
	Generation int    `json:"generation"`
	Input      Input  `json:"input"`
	Output     Output `json:"output"`
	Call       int64  `json:"call_ns"`
	Return     int64  `json:"return_ns"`
}

// Event is something the harness did: a kill, a restart, a fault summary.
type Event struct {
	At     int64  `json:"at_ns"`
	Server int    `json:"server"`
	What   string `json:"what"`
}

// Outage is one kill of a server: from the signal until its successor
// answered. A call in flight on the killed process cannot take effect
// after the process died; the restarted one was ready later still.
type Outage struct {
	Server     int   `json:"server"`
	Generation int   `json:"generation"`
	Killed     int64 `json:"killed_ns"`
	Ready      int64 `json:"ready_ns"`
}

// History collects the operations and events of a run. It is safe for
// concurrent use.
type History struct {
	start   time.Time
	mu      sync.Mutex
	records []Record
	events  []Event
	outages []Outage
}

// newHistory starts the run's clock.
func newHistory() *History { return &History{start: time.Now()} }

// now reads the run's monotonic clock.
func (h *History) now() int64 { return int64(time.Since(h.start)) }

// add records one finished operation.
func (h *History) add(r Record) {
	h.mu.Lock()
	h.records = append(h.records, r)
	h.mu.Unlock()
}

// event records what the harness did.
func (h *History) event(server int, what string) {
	h.mu.Lock()
	h.events = append(h.events, Event{At: h.now(), Server: server, What: what})
	h.mu.Unlock()
}

// outage records that generation of server was killed at killed and its
// successor was ready at ready.
func (h *History) outage(server, generation int, killed, ready int64) {
	h.mu.Lock()
	h.outages = append(h.outages, Outage{server, generation, killed, ready})
	h.mu.Unlock()
}

// count is the number of operations recorded so far.
func (h *History) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.records)
}

// unknown is the number of operations whose outcome is unknown.
func (h *History) unknown() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r.Output.Unknown {
			n++
		}
	}
	return n
}

// snapshot is a copy of the records so far.
func (h *History) snapshot() []Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.records)
}

// operations turns the records into Porcupine's history. A failed Read or
// Grep says nothing and is left out. An operation of unknown outcome may take
// effect at any time after its call: until its server process was killed
// (the restart's readiness bounds it), else until the end of the history.
func (h *History) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	var end int64
	for _, r := range h.records {
		end = max(end, r.Return)
	}
	ops := make([]porcupine.Operation, 0, len(h.records))
	for _, r := range h.records {
		if r.Output.Unknown && (r.Input.Kind == KindRead || r.Input.Kind == KindGrep) {
			continue
		}
		ret := r.Return
		if r.Output.Unknown {
			ret = end + 1
			for _, o := range h.outages {
				if o.Server == r.Server && o.Generation == r.Generation {
					ret = max(r.Return, o.Ready)
				}
			}
		}
		ops = append(ops, porcupine.Operation{
			ClientId: r.Client,
			Input:    r.Input,
			Call:     r.Call,
			Output:   r.Output,
			Return:   ret,
			Metadata: r.Server,
		})
	}
	return ops
}

// annotations marks the harness's events on the visualization, each on
// its server's row.
func (h *History) annotations() []porcupine.Annotation {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]porcupine.Annotation, 0, len(h.events))
	for _, e := range h.events {
		out = append(out, porcupine.Annotation{
			Tag:             "server " + strconv.Itoa(e.Server),
			Start:           e.At,
			End:             e.At,
			Description:     e.What,
			BackgroundColor: "#f4c7c3",
		})
	}
	return out
}

// historyFile is the JSON form of a history, as written to the artifacts.
type historyFile struct {
	Run        string   `json:"run"`
	Seed       int64    `json:"seed"`
	Paths      []string `json:"paths"`
	Pairs      bool     `json:"pairs"`
	Operations []Record `json:"operations"`
	Events     []Event  `json:"events"`
	Outages    []Outage `json:"outages"`
}

// save writes the history as JSON.
func (h *History) save(path string, run string, seed int64, w *workload) error {
	h.mu.Lock()
	doc := historyFile{Run: run, Seed: seed, Paths: w.paths, Pairs: w.pairs, Operations: h.records, Events: h.events, Outages: h.outages}
	data, err := json.MarshalIndent(doc, "", " ")
	h.mu.Unlock()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// loadHistory reads a history saved by save, for checking again.
func loadHistory(path string) (*History, *workload, historyFile, error) {
	var doc historyFile
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, doc, err
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, doc, fmt.Errorf("%s: %w", path, err)
	}
	h := &History{records: doc.Operations, events: doc.Events, outages: doc.Outages}
	return h, &workload{paths: doc.Paths, pairs: doc.Pairs}, doc, nil
}

// before is the history's prefix at instant at (ns on the run's clock):
// the calls made before it, those still waiting for their answer then of
// unknown outcome, as a history cut there would have them. A prefix of a
// linearizable history is linearizable, so bisecting on at finds the call
// where a history the checker cannot finish stops being linearizable.
func (h *History) before(at int64) *History {
	cut := &History{outages: h.outages}
	for _, r := range h.records {
		if r.Call >= at {
			continue
		}
		if r.Return > at {
			r.Output, r.Return = Output{Unknown: true, Code: "Unavailable", Message: "cut"}, at
		}
		cut.records = append(cut.records, r)
	}
	for _, e := range h.events {
		if e.At < at {
			cut.events = append(cut.events, e)
		}
	}
	return cut
}
