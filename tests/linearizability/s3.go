package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// The S3 server's root credentials and the bucket the object runs mount.
const (
	s3AccessKey = "agentvfs-lin"
	s3SecretKey = "agentvfs-lin-secret"
	s3Bucket    = "agentvfs"
)

// s3Server is a versitygw serving a temporary directory on loopback (its
// posix backend: the bucket is a directory), with --keep-alive
// (docs/object-storage.md: without it every request opens a connection).
type s3Server struct {
	proc *process
	addr string
}

// startS3 starts versitygw over a new directory in dir with one bucket.
func startS3(bin, dir string) (*s3Server, error) {
	data := filepath.Join(dir, "s3")
	if err := os.MkdirAll(filepath.Join(data, s3Bucket), 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	env := append(baseEnv(), "ROOT_ACCESS_KEY="+s3AccessKey, "ROOT_SECRET_KEY="+s3SecretKey)
	proc, stdout, err := spawn(bin, []string{"--port", addr, "--quiet", "--keep-alive", "posix", data}, dir, env, filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	go func() {
		_, _ = io.Copy(io.Discard, stdout)
		stdout.Close()
	}()
	if err := waitListening(addr, proc, 20*time.Second); err != nil {
		proc.kill()
		return nil, fmt.Errorf("versitygw: %w (log %s)", err, filepath.Join(dir, "versitygw.log"))
	}
	return &s3Server{proc: proc, addr: addr}, nil
}

// stop kills the server.
func (s *s3Server) stop() { s.proc.kill() }

// baseEnv is what every child process gets of the harness's environment:
// no AWS variables (each object mount names its endpoint, and its
// credentials are set explicitly).
func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
