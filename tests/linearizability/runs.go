package main

import (
	"fmt"
	"strings"
)

// runSpec is one run of the suite: which tier, how many servers, whether
// their S3 traffic goes through the fault-injecting proxy.
type runSpec struct {
	name    string
	tier    string
	servers int
	proxy   bool
	// pairs keeps Moves within pairs of paths and checks each pair as its
	// own partition: with the proxy's faults a few hundred calls have no
	// answer, and each may take effect at any later point, which one
	// partition over four paths cannot check in time.
	pairs bool
	// branch runs every client call in a branch forked from the mount
	// after the base got a file at every path (seedBranch): the overlay
	// of docs/branches.md under the same model and the same kill -9.
	branch bool
	// maxOps caps the run's operations below -ops (0: no cap), for runs
	// whose calls are slow: a call in a branch on the object tier costs
	// several S3 round trips.
	maxOps int
	// grep adds Greps over every path to the mix: for tiers whose search
	// reads one view of all files (docs/linearizability.md § Grep).
	grep bool
	// volatile marks a tier that keeps nothing across a restart (State):
	// the run kills no server.
	volatile bool
	about    string
}

// runs are the suite's runs, in the order they run. Every run but a
// volatile tier's kills one of its servers with SIGKILL a third of the way
// in and restarts it on the same data.
var runs = []runSpec{
	{name: "state", tier: "state", servers: 1, grep: true, volatile: true, about: "State tier (a session's memory), one server, Greps in the mix, no kill"},
	{name: "store", tier: "store", servers: 1, grep: true, about: "Store tier (RocksDB), one server, Greps in the mix"},
	{name: "filesystem", tier: "filesystem", servers: 1, about: "Filesystem tier (a temporary directory), one server"},
	{name: "object-2", tier: "object", servers: 2, about: "object tier (versitygw), two servers on one bucket"},
	{name: "object-3", tier: "object", servers: 3, about: "object tier (versitygw), three servers on one bucket"},
	{name: "object-proxy", tier: "object", servers: 2, proxy: true, pairs: true, about: "object tier, two servers, each one's S3 traffic through the fault-injecting proxy"},
	{name: "store-branch", tier: "store", servers: 1, branch: true, about: "Store tier, one server, every call in a branch of the mount"},
	{name: "filesystem-branch", tier: "filesystem", servers: 1, branch: true, about: "Filesystem tier, one server, every call in a branch of the mount (its changes in the server's data directory)"},
	{name: "object-2-branch", tier: "object", servers: 2, branch: true, maxOps: 6000, about: "object tier, two servers on one bucket, every call in a branch of the mount"},
}

// selectRuns returns the runs named in a comma-separated list ("all":
// every run).
func selectRuns(names string) ([]runSpec, error) {
	if names == "" || names == "all" {
		return runs, nil
	}
	var out []runSpec
	for _, name := range strings.Split(names, ",") {
		found := false
		for _, r := range runs {
			if r.name == strings.TrimSpace(name) {
				out = append(out, r)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no run named %q (runs: %s)", name, runNames())
		}
	}
	return out, nil
}

func runNames() string {
	names := make([]string, len(runs))
	for i, r := range runs {
		names[i] = r.name
	}
	return strings.Join(names, ", ")
}

// mountPrefix is where every run mounts the tier under test.
const mountPrefix = "/lin"

// config renders a server's configuration: the tier under test at
// mountPrefix over data (a Store's directory or a Filesystem root), or
// the bucket at endpoint for the object tier.
func (r runSpec) config(data, endpoint string) string {
	var b strings.Builder
	b.WriteString("listen = \"127.0.0.1:0\"\n\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n")
	if r.tier == "state" {
		// The root mount above serves mountPrefix too.
		return b.String()
	}
	fmt.Fprintf(&b, "[[mount]]\nprefix = %q\ntier = %q\n", mountPrefix, r.tier)
	switch r.tier {
	case "store":
		fmt.Fprintf(&b, "path = %q\n", data)
	case "filesystem":
		fmt.Fprintf(&b, "root = %q\n", data)
	case "object":
		fmt.Fprintf(&b, "bucket = %q\nendpoint = %q\npath_style = true\n", s3Bucket, "http://"+endpoint)
		// Short enough that a blackholed request is retried soon, long
		// enough that no healthy request is cut.
		b.WriteString("timeout_seconds = 20\nrequest_timeout_seconds = 2\n")
	}
	return b.String()
}
