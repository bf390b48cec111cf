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
func recheck(path string, timeout time.Duration) (bool, error) {
	h, w, doc, err := loadHistory(path)
	if err != nil {
		return false, err
	}
	v := check(w, h, timeout)
	fmt.Printf("%s (run %s, seed %d): %d operations, checker %s in %s\n",
		path, doc.Run, doc.Seed, len(doc.Operations), v.result, v.took.Round(time.Millisecond))
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
