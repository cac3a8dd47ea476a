package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// httpAnswer is one HTTP reply of the echo server, with the addresses as each
// end saw them: the server's view shows what the director rewrote.
type httpAnswer struct {
	Server       string `json:"server"`        // the real server's name
	ServerLocal  string `json:"server_local"`  // where the request arrived (RIP:port in VS/NAT, VIP:port in DR/TUN)
	ServerRemote string `json:"server_remote"` // who the server thinks asked (the client, or the full-NAT source)
	ClientLocal  string `json:"client_local,omitempty"`
	ClientRemote string `json:"client_remote,omitempty"` // whom the client talked to: the VIP
}

// echoHandler answers every request with "NAME local=ADDR remote=ADDR",
// but /name, which it answers with "NAME" and a newline: a body the same
// at each request, for checks that digest it.
func echoHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/name" {
			fmt.Fprintf(w, "%s\n", name)
			return
		}
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		l := ""
		if local != nil {
			l = local.String()
		}
		fmt.Fprintf(w, "%s local=%s remote=%s\n", name, l, r.RemoteAddr)
	})
}

// connKey is the request context's key of the watched connection the
// request came on.
type connKey struct{}

// serveEcho serves the echo answer on every listener until ctx ends. Each
// connection the server closes before its client did, unless the client
// asked for that (Connection: close), is reported on closes (when not nil)
// with the read error that ended it: a load test can then tell the
// server's closes from the network's.
func serveEcho(ctx context.Context, name string, closes io.Writer, lns ...net.Listener) error {
	echo := echoHandler(name)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c, ok := r.Context().Value(connKey{}).(*watchedConn); ok && r.Close {
				c.closeAsked.Store(true)
			}
			echo.ServeHTTP(w, r)
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	var stopping atomic.Bool
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		if closes != nil {
			ln = closeWatch{Listener: ln, name: name, w: closes, stopping: &stopping}
		}
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case <-ctx.Done():
		stopping.Store(true)
		srv.Close()
		return nil
	case err := <-errc:
		stopping.Store(true)
		srv.Close()
		return err
	}
}

// closeWatch is a listener whose connections report a close by the server
// that did not follow the client's own close (an EOF read).
type closeWatch struct {
	net.Listener
	name     string
	w        io.Writer
	stopping *atomic.Bool
}

func (l closeWatch) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, l: l, accepted: time.Now()}, nil
}

type watchedConn struct {
	net.Conn
	l          closeWatch
	accepted   time.Time
	peerClosed atomic.Bool
	closeAsked atomic.Bool // the client's request said Connection: close
	lastErr    atomic.Pointer[string]
	reads      atomic.Int64
	once       sync.Once
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.reads.Add(1)
	switch {
	case err == io.EOF:
		c.peerClosed.Store(true)
	case err != nil:
		e := err.Error()
		c.lastErr.Store(&e)
	}
	return n, err
}

func (c *watchedConn) Close() error {
	c.once.Do(func() {
		if c.peerClosed.Load() || c.closeAsked.Load() || c.l.stopping.Load() {
			return
		}
		last := "none"
		if e := c.lastErr.Load(); e != nil {
			last = *e
		}
		fmt.Fprintf(c.l.w, "echo %s: closed the connection from %s first, %v after accepting it, %d reads; last read error: %s\n",
			c.l.name, c.RemoteAddr(), time.Since(c.accepted).Round(time.Millisecond), c.reads.Load(), last)
	})
	return c.Conn.Close()
}

// parseAnswer reads "NAME local=A remote=B".
func parseAnswer(line string) (httpAnswer, error) {
	f := strings.Fields(line)
	if len(f) != 3 || !strings.HasPrefix(f[1], "local=") || !strings.HasPrefix(f[2], "remote=") {
		return httpAnswer{}, fmt.Errorf("unexpected answer %q", line)
	}
	return httpAnswer{Server: f[0], ServerLocal: strings.TrimPrefix(f[1], "local="), ServerRemote: strings.TrimPrefix(f[2], "remote=")}, nil
}

// requestTimeout bounds one request of httpGet, httpGetN and the keepalive
// role.
const requestTimeout = 5 * time.Second

// request sends one GET on conn and reads the answer, within timeout.
func request(conn net.Conn, br *bufio.Reader, host string, keepAlive bool, timeout time.Duration) (httpAnswer, error) {
	connHdr := "close"
	if keepAlive {
		connHdr = "keep-alive"
	}
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return httpAnswer{}, err
	}
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: %s\r\n\r\n", host, connHdr); err != nil {
		return httpAnswer{}, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return httpAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return httpAnswer{}, fmt.Errorf("reading body: %w", err)
	}
	a, err := parseAnswer(strings.TrimSpace(body))
	if err != nil {
		return httpAnswer{}, err
	}
	a.ClientLocal, a.ClientRemote = conn.LocalAddr().String(), conn.RemoteAddr().String()
	return a, nil
}

// httpGet makes one request on a new connection to addr (host:port).
func httpGet(addr string) (httpAnswer, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return httpAnswer{}, err
	}
	defer conn.Close()
	return request(conn, bufio.NewReader(conn), addr, false, requestTimeout)
}

// tally is what a series of requests got: answers per server, errors, and
// the first answer in full.
type tally struct {
	Requests int            `json:"requests"`
	ByServer map[string]int `json:"by_server"`
	Errors   []string       `json:"errors,omitempty"`
	First    *httpAnswer    `json:"first,omitempty"`
	// Remotes counts the addresses the client talked to (always the VIP).
	Remotes map[string]int `json:"remotes"`
}

// httpGetN makes n requests to addr, each on a new connection so that IPVS
// schedules each one.
func httpGetN(addr string, n int) tally {
	t := tally{Requests: n, ByServer: map[string]int{}, Remotes: map[string]int{}}
	for range n {
		a, err := httpGet(addr)
		if err != nil {
			t.Errors = append(t.Errors, err.Error())
			continue
		}
		t.ByServer[a.Server]++
		t.Remotes[a.ClientRemote]++
		if t.First == nil {
			t.First = &a
		}
	}
	return t
}

// keepAliveConn is one HTTP connection kept open across requests.
type keepAliveConn struct {
	conn net.Conn
	br   *bufio.Reader
	addr string
	// Timeout bounds one request; zero means requestTimeout.
	Timeout time.Duration
}

// dialKeepAlive opens the connection.
func dialKeepAlive(addr string) (*keepAliveConn, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &keepAliveConn{conn: conn, br: bufio.NewReader(conn), addr: addr}, nil
}

// Get sends one request on the open connection; it fails after Timeout
// (requestTimeout when zero).
func (k *keepAliveConn) Get() (httpAnswer, error) {
	timeout := k.Timeout
	if timeout == 0 {
		timeout = requestTimeout
	}
	return request(k.conn, k.br, k.addr, true, timeout)
}

// Close closes the connection.
func (k *keepAliveConn) Close() error { return k.conn.Close() }

// keepAliveLoop serves the keepalive role: one JSON answer (or error) per
// "get" line on in, until "quit" or EOF.
func keepAliveLoop(addr string, in *bufio.Scanner, out *json.Encoder) error {
	k, err := dialKeepAlive(addr)
	if err != nil {
		return err
	}
	defer k.Close()
	if err := out.Encode(map[string]string{"local": k.conn.LocalAddr().String(), "remote": k.conn.RemoteAddr().String()}); err != nil {
		return err
	}
	for in.Scan() {
		switch strings.TrimSpace(in.Text()) {
		case "get":
			a, err := k.Get()
			if err != nil {
				if err := out.Encode(map[string]string{"error": err.Error()}); err != nil {
					return err
				}
				continue
			}
			if err := out.Encode(a); err != nil {
				return err
			}
		case "quit":
			return nil
		default:
			return errors.New("keepalive: commands are get and quit")
		}
	}
	return in.Err()
}
