// Command linearizability checks that agentvfs's tiers are linearizable:
// it starts real servers (and versitygw for the object tier), runs
// concurrent clients doing a random mix of Read, Write (plain, create_only,
// if_version), Delete (plain, if_version), Move (create_only, if_version),
// Edit and MultiEdit on a few paths while it kills a server with SIGKILL
// and, for one run, breaks the store's network, and checks the recorded
// history with Porcupine against a model of the contract
// (docs/linearizability.md).
//
//	go run . -run store,filesystem -ops 20000
//
// It exits non-zero when a run is not shown linearizable, leaving the
// history and Porcupine's visualization under $CARGO_TARGET_DIR/linearizability/.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

func main() {
	opt, names, saved := parseFlags()
	if saved != "" {
		ok, err := recheck(saved, opt.checkTimeout, opt.before)
		if err != nil {
			fmt.Fprintln(os.Stderr, "linearizability:", err)
			os.Exit(2)
		}
		if !ok {
			os.Exit(1)
		}
		return
	}
	specs, err := selectRuns(names)
	if err != nil {
		fmt.Fprintln(os.Stderr, "linearizability:", err)
		os.Exit(2)
	}
	if err := opt.validate(specs); err != nil {
		fmt.Fprintln(os.Stderr, "linearizability:", err)
		os.Exit(2)
	}
	fmt.Printf("linearizability: seed %d, %d clients, agentvfs %s\n", opt.seed, opt.clients, opt.bin)
	passed, failed := 0, 0
	for _, spec := range specs {
		fmt.Printf("== %s: %s\n", spec.name, spec.about)
		res := execRun(spec, opt)
		report(res)
		if res.failed() {
			failed++
		} else {
			passed++
		}
	}
	fmt.Printf("linearizability: %d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// parseFlags reads the flags, whose defaults come from the environment.
func parseFlags() (options, string, string) {
	out := filepath.Join(envOr("CARGO_TARGET_DIR", filepath.Join(os.Getenv("HOME"), ".cache", "agentvfs-target")), "linearizability")
	var opt options
	var seconds int
	names := flag.String("run", envOr("AGENTVFS_LIN_RUN", "all"), "runs to do, comma-separated ("+runNames()+") or all [AGENTVFS_LIN_RUN]")
	flag.StringVar(&opt.bin, "bin", os.Getenv("AGENTVFS_BIN"), "the agentvfs binary [AGENTVFS_BIN]")
	flag.StringVar(&opt.versitygw, "versitygw", envOr("AGENTVFS_VERSITYGW", lookPath("versitygw")), "the versitygw binary [AGENTVFS_VERSITYGW]")
	flag.StringVar(&opt.out, "out", out, "where failing runs leave their artifacts")
	flag.IntVar(&opt.ops, "ops", envInt("AGENTVFS_LIN_OPS", 20000), "operations per run [AGENTVFS_LIN_OPS]")
	flag.IntVar(&seconds, "seconds", envInt("AGENTVFS_LIN_SECONDS", 0), "run each run this long instead of -ops operations (a soak) [AGENTVFS_LIN_SECONDS]")
	flag.DurationVar(&opt.maxDuration, "max-duration", 3*time.Minute, "stop a run that has not made -ops operations by then")
	flag.IntVar(&opt.clients, "clients", envInt("AGENTVFS_LIN_CLIENTS", 8), "concurrent clients, spread over a run's servers [AGENTVFS_LIN_CLIENTS]")
	flag.Int64Var(&opt.seed, "seed", int64(envInt("AGENTVFS_LIN_SEED", int(time.Now().UnixNano()%1e9))), "random seed of the workload, the kill and the proxy [AGENTVFS_LIN_SEED]")
	flag.DurationVar(&opt.callTimeout, "call-timeout", 30*time.Second, "deadline of one call")
	flag.DurationVar(&opt.checkTimeout, "check-timeout", time.Minute, "most time Porcupine may take on one history (past it the run fails as unknown)")
	flag.BoolVar(&opt.keep, "keep", false, "write the artifacts of passing runs too")
	saved := flag.String("recheck", "", "check this saved history.json again instead of running")
	flag.DurationVar(&opt.before, "before", 0, "with -recheck: check only the calls made before this instant of the run (those then unanswered as unknown), to bisect a history the checker gives up on")
	flag.BoolVar(&opt.pairs, "pairs", false, "keep every Move within a pair of paths (0↔1, 2↔3) and check each pair as its own partition, instead of one partition over all paths")
	flag.BoolVar(&opt.noCommits, "no-commits", false, "leave Commits (changesets) out of the mix; their share goes to Reads")
	flag.BoolVar(&opt.tornCommits, "torn-commits", false, "send each Commit as its single calls one by one, as a server that applies changesets non-atomically would (the checker must find the run not linearizable)")
	flag.Parse()
	opt.duration = time.Duration(seconds) * time.Second
	return opt, *names, *saved
}

// validate checks that the binaries the runs need are there.
func (opt options) validate(specs []runSpec) error {
	if opt.bin == "" {
		return fmt.Errorf("no agentvfs binary: set AGENTVFS_BIN or -bin")
	}
	if opt.clients < 1 || opt.ops < 1 {
		return fmt.Errorf("-clients and -ops must be positive")
	}
	for _, s := range specs {
		if s.tier == "object" && opt.versitygw == "" {
			return fmt.Errorf("run %s needs versitygw: scripts/versitygw install prints its path; set AGENTVFS_VERSITYGW", s.name)
		}
	}
	return nil
}

// report prints one run's outcome.
func report(r result) {
	rate := float64(r.ops) / r.elapsed.Seconds()
	fmt.Printf("   %d operations (%d of unknown outcome) in %s (%.0f/s), %d kill(s)\n",
		r.ops, r.unknown, r.elapsed.Round(time.Millisecond), rate, r.kills)
	for _, f := range r.faults {
		fmt.Printf("   %s\n", f)
	}
	switch {
	case r.err != nil:
		fmt.Printf("   FAILED: %v\n", r.err)
	case len(r.check.breaches) > 0:
		fmt.Printf("   FAILED: %d answers the contract never gives, e.g. %s\n", len(r.check.breaches), r.check.breaches[0])
	}
	if r.err == nil {
		switch r.check.result {
		case porcupine.Ok:
			fmt.Printf("   linearizable (checked in %s)\n", r.check.took.Round(time.Millisecond))
		case porcupine.Illegal:
			fmt.Printf("   FAILED: not linearizable (checked in %s)\n%s", r.check.took.Round(time.Millisecond), indent(r.check.explanation))
		default:
			fmt.Printf("   FAILED: the checker gave up after %s (result %s): linearizability unknown; raise -check-timeout or lower -ops\n",
				r.check.took.Round(time.Millisecond), r.check.result)
		}
	}
	if r.ops < r.wanted {
		fmt.Printf("   note: fewer operations than the %d asked (slower than -max-duration allows)\n", r.wanted)
	}
	if r.artifacts != "" {
		fmt.Printf("   artifacts: %s\n", r.artifacts)
	}
}

// indent indents every line of s.
func indent(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString("   " + line)
	}
	return b.String()
}

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

func envInt(key string, fallback int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return fallback
}

func lookPath(name string) string {
	p, _ := exec.LookPath(name)
	return p
}
