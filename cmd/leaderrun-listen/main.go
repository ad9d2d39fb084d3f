// Command leaderrun-listen serves --listen's endpoint for leaderrun, which
// links no network code itself: leaderrun starts it only for a run with
// --listen, and it lives as long as that run. It reads on its standard
// input the pipe's messages (internal/listenwire): a Hello, which names
// the address to bind, then the run's State each time it changes. It
// answers "bound ADDR" or "error MESSAGE" once, then "ack SEQ" for each
// state applied, and exits when its input ends (leaderrun exited or died).
//
// It serves GET and HEAD of three paths, and nothing else:
//
//   - /leader: 200 while this instance holds the lease and its child has
//     been started, and more than listenwire.Lead before the lease's stop
//     point on CLOCK_BOOTTIME (so even a leaderrun frozen past it cannot
//     leave a 200 behind); 503 otherwise.
//   - /status: the lease's state as this instance knows it, in the shape
//     of `leaderrun status --json`, with its role.
//   - /metrics: Prometheus' text format.
//
// Requests are bounded in size and time, and in number at once; nothing
// served holds a secret (the store's URL never reaches this program). It
// is not meant to be run by hand.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/internal/listenwire"
)

func main() {
	// leaderrun's end ends this program (its input closes): a Ctrl-C at a
	// terminal, or systemd's stop, must not take the endpoint away while
	// the run is still stopping its child.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	os.Exit(run(os.Stdin, os.Stdout))
}

func run(in io.Reader, out io.Writer) int {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 4<<10), listenwire.MaxLine)
	var hello listenwire.Hello
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &hello) != nil || hello.Addr == "" {
		fmt.Fprintln(out, "error leaderrun-listen is started by leaderrun --listen, not by hand")
		return 2
	}
	ln, err := listen(hello.Addr)
	if err != nil {
		// The system's reason alone: leaderrun names the address.
		var se *os.SyscallError
		if errors.As(err, &se) {
			err = se.Err
		}
		fmt.Fprintln(out, "error cannot bind it: "+oneLine(err.Error()))
		return 1
	}
	srv := newServer(hello)
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      5 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    8 << 10,
		// A client's bad request is no news for leaderrun's stderr.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	served := make(chan struct{})
	go func() { // ends when hs is closed below
		defer close(served)
		_ = hs.Serve(limitListener(ln, maxConns))
	}()
	fmt.Fprintln(out, "bound "+boundAddr(hello.Addr, ln))
	for sc.Scan() {
		var st listenwire.State
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
			continue // a line this version cannot read changes nothing
		}
		at := srv.apply(st)
		fmt.Fprintf(out, "ack %d %d\n", st.Seq, int64(at))
	}
	_ = hs.Close()
	<-served
	return 0
}

// maxConns bounds the connections served at once: more wait in the
// kernel's backlog. Scrapers and health checks need a handful.
const maxConns = 64

// listen binds addr: "unix:PATH" or "host:port". A Unix socket left by an
// instance that died (nobody accepts on it) is replaced; one in use is
// not.
func listen(addr string) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok {
		return net.Listen("tcp", addr)
	}
	ln, err := net.Listen("unix", path)
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		return ln, err
	}
	if st, serr := os.Lstat(path); serr != nil || st.Mode().Type() != os.ModeSocket {
		return nil, err
	}
	c, derr := net.DialTimeout("unix", path, time.Second)
	if derr == nil {
		c.Close()
		return nil, err // another process serves it
	}
	if !errors.Is(derr, syscall.ECONNREFUSED) {
		return nil, err
	}
	_ = os.Remove(path)
	return net.Listen("unix", path)
}

// boundAddr is the address bound, with the port the kernel chose for
// port 0.
func boundAddr(addr string, ln net.Listener) string {
	if strings.HasPrefix(addr, "unix:") {
		return addr
	}
	return ln.Addr().String()
}

// oneLine makes an error one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// limitListener accepts at most n connections at once.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limitedListener{Listener: ln, sem: make(chan struct{}, n)}
}

type limitedListener struct {
	net.Listener
	sem chan struct{}
}

func (l *limitedListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
