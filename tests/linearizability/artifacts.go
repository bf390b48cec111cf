package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// saveArtifacts writes what a reader needs to see why a run failed into
// opt.out/<run>-<time>/: the history (history.json), Porcupine's
// visualization (visualization.html), a summary (summary.txt) and the
// servers' logs; it returns the directory.
func saveArtifacts(spec runSpec, opt options, w *workload, h *History, v verdict, dir string) (string, error) {
	out := filepath.Join(opt.out, spec.name+"-"+time.Now().UTC().Format("20060102-150405"))
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	if err := h.save(filepath.Join(out, "history.json"), spec.name, opt.seed, w); err != nil {
		return out, err
	}
	if v.info != nil {
		if err := porcupine.VisualizePath(v.model, *v.info, filepath.Join(out, "visualization.html")); err != nil {
			return out, err
		}
	}
	if err := os.WriteFile(filepath.Join(out, "summary.txt"), []byte(summary(spec, opt, v)), 0o644); err != nil {
		return out, err
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "agentvfs.log"))
	logs = append(logs, filepath.Join(dir, "versitygw.log"))
	for _, log := range logs {
		name := filepath.Base(log)
		if server := filepath.Base(filepath.Dir(log)); strings.HasPrefix(server, "server-") {
			name = server + ".log"
		}
		if err := copyFile(log, filepath.Join(out, name)); err != nil && !os.IsNotExist(err) {
			return out, err
		}
	}
	return out, nil
}

// summary is the text of summary.txt: the run, its settings and the
// verdict with its explanation.
func summary(spec runSpec, opt options, v verdict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %s: %s\nseed %d, %d clients, pairs %t\n", spec.name, spec.about, opt.seed, opt.clients, opt.pairs || spec.pairs)
	fmt.Fprintf(&b, "checker: %s in %s\n", v.result, v.took.Round(time.Millisecond))
	if len(v.breaches) > 0 {
		fmt.Fprintf(&b, "%d answers the contract never gives:\n", len(v.breaches))
		for i, br := range v.breaches {
			if i == maxListed {
				b.WriteString("  …\n")
				break
			}
			b.WriteString("  " + br + "\n")
		}
	}
	b.WriteString(v.explanation)
	return b.String()
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
