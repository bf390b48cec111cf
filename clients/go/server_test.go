package agentvfs_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// startServer runs the real agentvfs binary ($AGENTVFS_BIN) on an ephemeral
// loopback port in a temporary directory, with config (TOML) when not empty,
// and returns its address; the process is killed when the test ends.
func startServer(t *testing.T, config string) string {
	t.Helper()
	bin := os.Getenv("AGENTVFS_BIN")
	if bin == "" {
		t.Fatal("AGENTVFS_BIN must name the agentvfs binary (scripts/test-go sets it)")
	}
	dir := t.TempDir()
	args := []string{"serve", "--listen", "127.0.0.1:0"}
	if config != "" {
		path := filepath.Join(dir, "agentvfs.toml")
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	// The default Store data directory is the user's; each test server keeps its
	// own, outside the working directory it serves at /workspace.
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir())
	var logs bytes.Buffer // the server's log, shown when the test fails
	cmd.Stderr = &logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "agentvfs listening on ")
	if err != nil || !ok {
		t.Fatalf("server did not start: %q %v", line, err)
	}
	return addr
}
