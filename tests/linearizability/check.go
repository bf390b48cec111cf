package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// maxListed bounds how many breaches and candidate operations a report
// lists.
const maxListed = 12

// verdict is what the checks found in a history.
type verdict struct {
	result porcupine.CheckResult
	took   time.Duration
	// breaches are answers the contract never gives (INTERNAL, ...).
	breaches []string
	model    porcupine.Model
	// info is Porcupine's linearization data of a history not shown
	// linearizable, for the visualization.
	info *porcupine.LinearizationInfo
	// explanation says where the linearization stops.
	explanation string
}

// linearizable reports whether Porcupine found a linearization.
func (v verdict) linearizable() bool { return v.result == porcupine.Ok }

// check runs the checks: the answers against the contract, then the history
// against the model, within timeout. A history shown not linearizable is
// checked again, verbosely, for the visualization and the explanation.
func check(w *workload, h *History, timeout time.Duration) verdict {
	v := verdict{model: newModel(w.paths, w.pairs)}
	for _, r := range h.snapshot() {
		if why := contractBreach(r.Output); why != "" {
			v.breaches = append(v.breaches, fmt.Sprintf("%s at %s from server %d: %s", why,
				time.Duration(r.Call), r.Server, describe(w.paths, r.Input, r.Output)))
		}
	}
	ops := h.operations()
	start := time.Now()
	v.result = porcupine.CheckOperationsTimeout(v.model, ops, timeout)
	v.took = time.Since(start)
	if v.result != porcupine.Illegal {
		// Linearizable, or the checker gave up: checking again verbosely
		// would only give up again.
		return v
	}
	_, info := porcupine.CheckOperationsVerbose(v.model, ops, timeout)
	info.AddAnnotations(h.annotations())
	v.info = &info
	v.explanation = explain(w, partitions(w, ops), info)
	return v
}

// partitions splits ops as the model does.
func partitions(w *workload, ops []porcupine.Operation) [][]porcupine.Operation {
	if w.pairs {
		return partitionPairs(ops)
	}
	return [][]porcupine.Operation{ops}
}

// explain says, for each partition that no linearization covers, how far
// the longest one got: the states the model can be in after it, and the
// operations that could come next, none of which the model allows.
func explain(w *workload, parts [][]porcupine.Operation, info porcupine.LinearizationInfo) string {
	var b strings.Builder
	for p, seqs := range info.PartialLinearizations() {
		ops := parts[p]
		var longest []int
		for _, s := range seqs {
			if len(s) > len(longest) {
				longest = s
			}
		}
		if len(longest) == len(ops) {
			continue
		}
		fmt.Fprintf(&b, "partition %d (%s): the longest linearization covers %d of its %d operations.\n",
			p, partitionPaths(w, ops), len(longest), len(ops))
		states := []state{{}}
		for _, id := range longest {
			states = after(states, ops[id])
		}
		b.WriteString("  the model's possible states after it:\n")
		for i, s := range states {
			if i == maxListed {
				fmt.Fprintf(&b, "    … %d more\n", len(states)-i)
				break
			}
			fmt.Fprintf(&b, "    %s\n", describeState(w.paths, s))
		}
		b.WriteString("  none of the operations that could come next is allowed in any of them:\n")
		for i, op := range nextCandidates(ops, longest) {
			if i == maxListed {
				b.WriteString("    …\n")
				break
			}
			fmt.Fprintf(&b, "    [%s–%s] client %d, server %v: %s\n", time.Duration(op.Call), time.Duration(op.Return),
				op.ClientId, op.Metadata, describe(w.paths, op.Input.(Input), op.Output.(Output)))
		}
	}
	return b.String()
}

// after steps every state through op, keeping each resulting state once.
func after(states []state, op porcupine.Operation) []state {
	var next []state
	for _, s := range states {
		for _, t := range step(s, op.Input.(Input), op.Output.(Output)) {
			if !slices.Contains(next, t) {
				next = append(next, t)
			}
		}
	}
	return next
}

// nextCandidates are the operations outside the linearized prefix that
// could be linearized next: called before any of them returned.
func nextCandidates(ops []porcupine.Operation, done []int) []porcupine.Operation {
	in := make([]bool, len(ops))
	for _, id := range done {
		in[id] = true
	}
	first := int64(-1)
	for i, op := range ops {
		if !in[i] && (first < 0 || op.Return < first) {
			first = op.Return
		}
	}
	var out []porcupine.Operation
	for i, op := range ops {
		if !in[i] && op.Call <= first {
			out = append(out, op)
		}
	}
	return out
}

// partitionPaths names the paths a partition's operations touch.
func partitionPaths(w *workload, ops []porcupine.Operation) string {
	seen := map[int]bool{}
	for _, op := range ops {
		for _, p := range op.Input.(Input).paths() {
			seen[p] = true
		}
	}
	var names []string
	for i, p := range w.paths {
		if seen[i] {
			names = append(names, p)
		}
	}
	return strings.Join(names, ", ")
}
