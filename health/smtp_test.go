package health

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// smtpServer answers each connection with greeting, then reads a line
// and answers helo, then reads a line and answers quit. An empty answer
// closes the connection instead; "hangup" closes it without reading the
// line before; "silent" answers nothing at all. The lines it read go to
// got.
type smtpServer struct {
	greeting, helo, quit string
	got                  chan string
}

func (s *smtpServer) serve(t *testing.T, host string) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s.got = make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.converse(c)
		}
	}()
	return addrPort(t, ln.Addr())
}

func (s *smtpServer) converse(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	answers := []string{s.greeting, s.helo, s.quit}
	for i, answer := range answers {
		if answer == "silent" {
			r.ReadString('\n') // until the client gives up
			return
		}
		if answer == "" {
			return
		}
		if _, err := c.Write([]byte(answer)); err != nil {
			return
		}
		if i+1 < len(answers) && answers[i+1] == "hangup" {
			return
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		s.got <- line
	}
}

// TestProbeSMTP: the conversation keepalived's SMTP_CHECK holds, with
// replies of one line or several, and each way it fails.
func TestProbeSMTP(t *testing.T) {
	const ok = "250 mx.example.com\r\n"
	for _, host := range loopbacks {
		good := &smtpServer{greeting: "220 mx.example.com ESMTP\r\n", helo: ok, quit: "221 bye\r\n"}
		addr := good.serve(t, host)
		wantPass(t, "smtp "+host, probe(t, addr, Spec{Type: "smtp"}))
		for _, want := range []string{"HELO smtpchecker.keepalived.org\r\n", "QUIT\r\n"} {
			if got := <-good.got; got != want {
				t.Errorf("the server read %q, want %q", got, want)
			}
		}
		wantPass(t, "smtp helo", probe(t, addr, Spec{Type: "smtp", Helo: "lb1.example.com"}))
		if got := <-good.got; got != "HELO lb1.example.com\r\n" {
			t.Errorf("the server read %q, want HELO lb1.example.com", got)
		}
		<-good.got
		// Port replaces the target's port.
		closed := closedPort(t, "tcp", host)
		wantPass(t, "smtp port", probe(t, closed, Spec{Type: "smtp", Port: int(addr.Port())}))
		wantFail(t, "smtp closed", probe(t, closed, Spec{Type: "smtp"}), "connect "+closed.String()+": connection refused")
	}
	long := strings.Repeat("x", 2000)
	for _, c := range []struct {
		name string
		srv  smtpServer
		want string // "" for a pass
	}{
		{"multi-line greeting", smtpServer{greeting: "220-mx.example.com ESMTP\r\n220-no UCE\n220 \r\n", helo: ok, quit: "221 bye\r\n"}, ""},
		{"greeting of a code only", smtpServer{greeting: "220\r\n", helo: "250-mx\r\n250-SIZE\r\n250 HELP\r\n", quit: "221\r\n"}, ""},
		{"QUIT answered otherwise", smtpServer{greeting: "220 mx\r\n", helo: ok, quit: "500 what\r\n"}, ""},
		{"greeting 554", smtpServer{greeting: "554 5.3.2 no service here\r\n"}, `smtp greeting: 554 "5.3.2 no service here", want 220`},
		{"greeting 421 after lines", smtpServer{greeting: "421-busy\r\n421 try later\r\n"}, `smtp greeting: 421 "try later", want 220`},
		{"HELO refused", smtpServer{greeting: "220 mx\r\n", helo: "501 5.5.4 bad HELO\r\n"}, `smtp HELO: 501 "5.5.4 bad HELO", want 250`},
		{"not SMTP", smtpServer{greeting: "HTTP/1.0 400 Bad Request\r\n"}, `smtp greeting: bad reply line "HTTP/1.0 400 Bad Request"`},
		{"a code and junk", smtpServer{greeting: "220mx\r\n"}, `smtp greeting: bad reply line "220mx"`},
		{"codes mixed", smtpServer{greeting: "220-mx\r\n250 ok\r\n"}, "smtp greeting: reply of codes 220 and 250"},
		{"closed after the greeting's first line", smtpServer{greeting: "220-mx\r\n", helo: "hangup"}, "smtp greeting: connection closed"},
		{"closed at once", smtpServer{}, "smtp greeting: connection closed"},
		{"closed instead of QUIT's reply", smtpServer{greeting: "220 mx\r\n", helo: ok}, "smtp QUIT: connection closed"},
		{"a line too long", smtpServer{greeting: "220 " + long + "\r\n"}, "smtp greeting: reply line over 1024 bytes"},
		{"too many lines", smtpServer{greeting: strings.Repeat("220-x\r\n", 70) + "220 x\r\n"}, "smtp greeting: reply over 64 lines"},
		{"silent", smtpServer{greeting: "silent"}, "timeout after 200ms"},
		{"silent after HELO", smtpServer{greeting: "220 mx\r\n", helo: "silent"}, "timeout after 200ms"},
	} {
		srv := c.srv
		err := probe(t, srv.serve(t, "127.0.0.1"), Spec{Type: "smtp", Interval: "1s", Timeout: "200ms"})
		if c.want == "" {
			wantPass(t, c.name, err)
		} else {
			wantFail(t, c.name, err, c.want)
		}
	}
	// A cancelled context is no timeout.
	srv := smtpServer{greeting: "silent"}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if err := Probe(ctx, Target{Addr: srv.serve(t, "127.0.0.1"), Spec: Spec{Type: "smtp", Interval: "20s", Timeout: "10s"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled smtp probe: %v, want context.Canceled", err)
	}
}
