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
	return spawnServer(t, t.TempDir(), "127.0.0.1:0", config).addr
}

// server is one `agentvfs serve` process.
type server struct {
	cmd  *exec.Cmd
	addr string
}

// spawnServer runs the binary in dir (its working directory, where a
// relative Store path lies) listening on listen, with config when not
// empty; the process is killed when the test ends, or earlier by kill.
func spawnServer(t *testing.T, dir, listen, config string) *server {
	t.Helper()
	bin := os.Getenv("AGENTVFS_BIN")
	if bin == "" {
		t.Fatal("AGENTVFS_BIN must name the agentvfs binary (scripts/test-go sets it)")
	}
	args := []string{"serve", "--listen", listen}
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
	s := &server{cmd: cmd}
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("server log (%s):\n%s", listen, logs.String())
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "agentvfs listening on ")
	if err != nil || !ok {
		t.Fatalf("server did not start: %q %v", line, err)
	}
	s.addr = addr
	return s
}

// kill ends the process with SIGKILL, as a crash would, and waits for it.
func (s *server) kill() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
