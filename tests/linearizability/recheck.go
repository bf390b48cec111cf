package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"
)

// recheck checks a saved history (history.json) again, e.g. after a change
// of the model, and writes its visualization beside it when it is not
// linearizable; it reports whether it is.
// With before > 0 it checks only the history's prefix at that instant
// (History.before).
func recheck(path string, timeout, before time.Duration) (bool, error) {
	h, w, doc, err := loadHistory(path)
	if err != nil {
		return false, err
	}
	if before > 0 {
		h = h.before(int64(before))
	}
	v := check(w, h, timeout)
	fmt.Printf("%s (run %s, seed %d): %d operations, checker %s in %s\n",
		path, doc.Run, doc.Seed, h.count(), v.result, v.took.Round(time.Millisecond))
	for _, b := range v.breaches {
		fmt.Println("  " + b)
	}
	fmt.Print(indent(v.explanation))
	if v.info != nil {
		html := filepath.Join(filepath.Dir(path), "visualization.html")
		if err := porcupine.VisualizePath(v.model, *v.info, html); err != nil {
			return false, err
		}
		fmt.Println("visualization:", html)
	}
	return v.linearizable() && len(v.breaches) == 0, nil
}
