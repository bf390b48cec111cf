package main

import (
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every connection with what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a request through addr and reads the echoed answer.
func roundTrip(addr string) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("PUT /k")); err != nil {
		return "", err
	}
	buf := make([]byte, 6)
	_, err = io.ReadFull(c, buf)
	return string(buf), err
}

func TestProxyForwardsWithoutFaults(t *testing.T) {
	p, err := startProxy(echoServer(t), faults{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	if got, err := roundTrip(p.addr()); err != nil || got != "PUT /k" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
}

func TestProxyDropsResponsesAfterTheRequestArrived(t *testing.T) {
	p, err := startProxy(echoServer(t), faults{DropResponse: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	if got, err := roundTrip(p.addr()); err == nil {
		t.Fatalf("the response came through: %q", got)
	}
	if p.droppedResponses.Load() != 1 {
		t.Fatalf("stats: %s", p.stats())
	}
}
