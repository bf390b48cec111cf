package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// faults are the proxy's fault probabilities (per connection for Refuse,
// per chunk read for the others) and delay bounds.
type faults struct {
	// Refuse resets a new connection at once.
	Refuse float64
	// ResetRequest resets both sides instead of forwarding a piece of a
	// request: the request never arrives whole.
	ResetRequest float64
	// DropResponse resets both sides instead of forwarding a piece of a
	// response: the store served the request, its client never hears.
	DropResponse float64
	// Blackhole drops a response and every later byte of the connection,
	// leaving it open: the client waits until its request timeout.
	Blackhole float64
	// DelayRequest delays a piece of a request by up to MaxRequestDelay,
	// kept far below the client's request timeout, so a request never
	// arrives after its client gave up on it.
	DelayRequest    float64
	MaxRequestDelay time.Duration
	// DelayResponse delays a piece of a response by up to
	// MaxResponseDelay.
	DelayResponse    float64
	MaxResponseDelay time.Duration
}

// defaultFaults are the object-proxy run's faults: about one request in
// a hundred is refused, reset or loses its response, a few are delayed.
var defaultFaults = faults{
	Refuse:           0.01,
	ResetRequest:     0.003,
	DropResponse:     0.005,
	Blackhole:        0.0005,
	DelayRequest:     0.02,
	MaxRequestDelay:  20 * time.Millisecond,
	DelayResponse:    0.02,
	MaxResponseDelay: 200 * time.Millisecond,
}

// proxy is a fault-injecting TCP proxy on loopback in front of upstream
// (an agentvfs server's S3 traffic to versitygw).
type proxy struct {
	ln       net.Listener
	upstream string
	f        faults

	mu  sync.Mutex
	rng *rand.Rand

	conns, refused, resetRequests, droppedResponses, blackholed, delayed atomic.Int64
}

// startProxy listens on a free loopback port and forwards to upstream.
func startProxy(upstream string, f faults, seed int64) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, upstream: upstream, f: f, rng: rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))}
	go p.accept()
	return p, nil
}

// addr is where the proxy listens.
func (p *proxy) addr() string { return p.ln.Addr().String() }

// stop closes the listener; open connections end with their peers.
func (p *proxy) stop() { p.ln.Close() }

// stats summarizes the faults injected.
func (p *proxy) stats() string {
	return fmt.Sprintf("%d connections: %d refused, %d requests reset, %d responses dropped, %d blackholed, %d pieces delayed",
		p.conns.Load(), p.refused.Load(), p.resetRequests.Load(), p.droppedResponses.Load(), p.blackholed.Load(), p.delayed.Load())
}

func (p *proxy) chance(probability float64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Float64() < probability
}

func (p *proxy) delay(bound time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Duration(p.rng.Int64N(int64(bound) + 1))
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		go p.serve(c.(*net.TCPConn))
	}
}

// link is one proxied connection: closing it closes both sides, with a
// reset (RST) when asked.
type link struct {
	client, server *net.TCPConn
	once           sync.Once
}

func (l *link) close(reset bool) {
	l.once.Do(func() {
		if reset {
			_ = l.client.SetLinger(0)
			_ = l.server.SetLinger(0)
		}
		l.client.Close()
		l.server.Close()
	})
}

func (p *proxy) serve(client *net.TCPConn) {
	if p.chance(p.f.Refuse) {
		p.refused.Add(1)
		_ = client.SetLinger(0)
		client.Close()
		return
	}
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		_ = client.SetLinger(0)
		client.Close()
		return
	}
	l := &link{client: client, server: server.(*net.TCPConn)}
	go p.pump(l, true)
	p.pump(l, false)
}

// pump forwards one direction of l (request: client to server), injecting
// the faults of that direction, until either side closes.
func (p *proxy) pump(l *link, request bool) {
	src, dst := l.server, l.client
	if request {
		src, dst = l.client, l.server
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			switch {
			case request && p.chance(p.f.ResetRequest):
				p.resetRequests.Add(1)
				l.close(true)
				return
			case !request && p.chance(p.f.DropResponse):
				p.droppedResponses.Add(1)
				l.close(true)
				return
			case !request && p.chance(p.f.Blackhole):
				p.blackholed.Add(1)
				_, _ = io.Copy(io.Discard, src)
				l.close(false)
				return
			case request && p.chance(p.f.DelayRequest):
				p.delayed.Add(1)
				time.Sleep(p.delay(p.f.MaxRequestDelay))
			case !request && p.chance(p.f.DelayResponse):
				p.delayed.Add(1)
				time.Sleep(p.delay(p.f.MaxResponseDelay))
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				l.close(false)
				return
			}
		}
		if err != nil {
			l.close(false)
			return
		}
	}
}
