package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is a child process of the harness: an agentvfs server or
// versitygw. It dies with the harness (the kernel's parent-death signal).
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// spawn starts name with args in dir, its stderr appended to logPath; it
// returns the process and its stdout.
func spawn(name string, args []string, dir string, env []string, logPath string) (*process, io.ReadCloser, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer log.Close()
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer w.Close()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = w
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		stdout.Close()
		return nil, nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, stdout, nil
}

// kill sends SIGKILL and waits until the process is gone.
func (p *process) kill() {
	p.signalKill()
	<-p.exited
}

// signalKill sends SIGKILL without waiting.
func (p *process) signalKill() { _ = p.cmd.Process.Kill() }

// running reports whether the process has not exited.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// listenLine waits for the line `prefix ADDR` on stdout and returns ADDR;
// the rest of stdout is read and dropped until it closes.
func listenLine(stdout io.ReadCloser, prefix string, timeout time.Duration) (string, error) {
	lines := bufio.NewReader(stdout)
	found := make(chan string, 1)
	go func() {
		defer stdout.Close()
		line, _ := lines.ReadString('\n')
		found <- line
		_, _ = io.Copy(io.Discard, lines)
	}()
	select {
	case line := <-found:
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
		if !ok {
			return "", fmt.Errorf("expected %q on stdout, got %q", prefix, line)
		}
		return strings.TrimSpace(addr), nil
	case <-time.After(timeout):
		return "", fmt.Errorf("no %q on stdout within %s", prefix, timeout)
	}
}

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitListening waits until addr accepts TCP connections or p exits.
func waitListening(addr string, p *process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		if !p.running() {
			return fmt.Errorf("exited before listening on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not listening on %s within %s", addr, timeout)
}
