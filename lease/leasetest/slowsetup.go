package leasetest

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SlowSetup is a TCP proxy on 127.0.0.1 to the server at target that holds
// back the server's first answer on each connection for delay: a server
// slow to set a connection up (a login on a loaded host), and as quick as
// it is once the connection is up. It returns the proxy's address and a
// count of the connections it accepted; t's cleanup closes it and every
// connection and waits for its goroutines.
func SlowSetup(t testing.TB, target string, delay time.Duration) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln, target: target, delay: delay, done: make(chan struct{})}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return ln.Addr().String(), &p.accepted
}

type slowProxy struct {
	ln       net.Listener
	target   string
	delay    time.Duration
	done     chan struct{}
	accepted atomic.Int32

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func (p *slowProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(s, c)
			_ = s.Close()
		}()
		go func() {
			defer p.wg.Done()
			p.answer(c, s)
			_ = c.Close()
		}()
	}
}

// track records the connections for close; false once closed.
func (p *slowProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	default:
	}
	p.conns = append(p.conns, cs...)
	return true
}

// answer copies the server's bytes to the client, the first ones after
// delay (the server's slowness: the client's deadline, not this, decides
// what the client sees).
func (p *slowProxy) answer(c, s net.Conn) {
	buf := make([]byte, 32<<10)
	n, err := s.Read(buf)
	if n > 0 {
		t := time.NewTimer(p.delay)
		select {
		case <-t.C:
		case <-p.done:
			t.Stop()
			return
		}
		if _, werr := c.Write(buf[:n]); werr != nil {
			return
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return
	}
	_, _ = io.Copy(c, s)
}

func (p *slowProxy) close() {
	p.mu.Lock()
	close(p.done)
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
