package health

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// loopbacks are the addresses the probe tests serve on.
var loopbacks = []string{"127.0.0.1", "::1"}

func addrPort(t *testing.T, a net.Addr) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// listenTCP serves TCP connections on host by closing them.
func listenTCP(t *testing.T, host string) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
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
			c.Close()
		}
	}()
	return addrPort(t, ln.Addr())
}

// closedPort returns an address of host where network has no listener.
func closedPort(t *testing.T, network, host string) netip.AddrPort {
	t.Helper()
	var a net.Addr
	if network == "udp" {
		c, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		a = c.LocalAddr()
		c.Close()
	} else {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		a = ln.Addr()
		ln.Close()
	}
	return addrPort(t, a)
}

func probe(t *testing.T, addr netip.AddrPort, s Spec) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return Probe(ctx, Target{Addr: addr, Spec: s})
}

func wantPass(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v, want a pass", what, err)
	}
}

func wantFail(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || err.Error() != want {
		t.Errorf("%s: %v, want %q", what, err, want)
	}
}

func TestProbeTCP(t *testing.T) {
	for _, host := range loopbacks {
		addr := listenTCP(t, host)
		wantPass(t, "tcp "+addr.String(), probe(t, addr, Spec{Type: "tcp"}))
		closed := closedPort(t, "tcp", host)
		wantFail(t, "tcp closed "+closed.String(), probe(t, closed, Spec{Type: "tcp"}),
			"connect "+closed.String()+": connection refused")
		// Port replaces the target's port.
		wantPass(t, "tcp port", probe(t, closed, Spec{Type: "tcp", Port: int(addr.Port())}))
	}
}

func TestProbeHTTP(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write(bytes.Repeat([]byte("x"), 1<<20)) // more than a probe reads
		case "/fail":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/host":
			if r.Host != "www.example.com" || r.URL.RawQuery != "q=1" {
				w.WriteHeader(http.StatusNotFound)
			}
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Redirect(w, r, "/ok", http.StatusFound)
		}
	})
	for _, host := range loopbacks {
		srv := httptest.NewUnstartedServer(handler)
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		srv.Listener = ln
		srv.Start()
		t.Cleanup(srv.Close)
		addr := addrPort(t, ln.Addr())
		wantPass(t, "http /ok", probe(t, addr, Spec{Type: "http", Path: "/ok"}))
		wantFail(t, "http /fail", probe(t, addr, Spec{Type: "http", Path: "/fail"}), "http: status 503, want 200-399")
		wantPass(t, "http /host", probe(t, addr, Spec{Type: "http", Path: "/host?q=1", Host: "www.example.com"}))
		wantFail(t, "http /host without host", probe(t, addr, Spec{Type: "http", Path: "/host?q=1"}), "http: status 404, want 200-399")
		// A redirect is a status, not followed.
		wantPass(t, "http / (302)", probe(t, addr, Spec{Type: "http"}))
		wantFail(t, "http / want 200", probe(t, addr, Spec{Type: "http", Expect: "200"}), "http: status 302, want 200")
		wantPass(t, "http /204", probe(t, addr, Spec{Type: "http", Path: "/204", Expect: "200,204,300-399"}))
		closed := closedPort(t, "tcp", host)
		wantFail(t, "http closed", probe(t, closed, Spec{Type: "http"}), "connect "+closed.String()+": connection refused")
	}
}

// TestProbeTimeout: a server that accepts and never answers fails the
// probe at its timeout. Real clock: a real server, real sockets.
func TestProbeTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // never answered
		}
	}()
	addr := addrPort(t, ln.Addr())
	for _, typ := range []string{"http", "https"} {
		wantFail(t, typ+" silent server", probe(t, addr, Spec{Type: typ, Interval: "1s", Timeout: "200ms", TLSSkipVerify: typ == "https"}),
			"timeout after 200ms")
	}
	// A cancelled context is no timeout.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	err = Probe(ctx, Target{Addr: addr, Spec: Spec{Type: "http", Interval: "20s", Timeout: "10s"}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled probe: %v, want context.Canceled", err)
	}
	ln.Close()
	<-done
	for _, c := range held {
		c.Close()
	}
}

// selfSigned makes a certificate for www.example.com and 127.0.0.1 signed
// by its own key, and returns it with its PEM file.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "www.example.com"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"www.example.com"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, file
}

func TestProbeHTTPS(t *testing.T) {
	cert, ca := selfSigned(t)
	var sni []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{cert},
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni = append(sni, h.ServerName)
			return nil, nil
		},
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	defer srv.Close()
	addr := addrPort(t, srv.Listener.Addr())

	wantPass(t, "https with ca", probe(t, addr, Spec{Type: "https", CA: ca}))
	wantPass(t, "https with ca and host", probe(t, addr, Spec{Type: "https", CA: ca, Host: "www.example.com:443"}))
	wantPass(t, "https with ca and sni", probe(t, addr, Spec{Type: "https", CA: ca, SNI: "www.example.com"}))
	wantPass(t, "https with tls_skip_verify", probe(t, addr, Spec{Type: "https", TLSSkipVerify: true, SNI: "other.example"}))
	wantFail(t, "https failing status", probe(t, addr, Spec{Type: "https", CA: ca, Path: "/fail"}), "https: status 500, want 200-399")
	wantFail(t, "https without ca", probe(t, addr, Spec{Type: "https"}), "tls: x509: certificate signed by unknown authority")
	wantFail(t, "https with ca, wrong sni", probe(t, addr, Spec{Type: "https", CA: ca, SNI: "other.example"}),
		"tls: x509: certificate is valid for www.example.com, not other.example")
	if want := []string{"", "www.example.com", "www.example.com", "other.example"}; len(sni) < len(want) ||
		strings.Join(sni[:len(want)], ",") != strings.Join(want, ",") {
		t.Errorf("server names sent: %q, want %q first", sni, want)
	}
	// Plain HTTP against the TLS port fails with a status from Go's server.
	wantFail(t, "http to https port", probe(t, addr, Spec{Type: "http"}), "http: status 400, want 200-399")
}

// serveDNS answers A queries for ok.example. (with an A record) and
// NXDOMAIN for any other name, on a UDP socket of host; other types of
// ok.example. get no answer. A query for late.example. gets first a reply
// with a wrong ID.
func serveDNS(t *testing.T, host string) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			reply := func(id uint16) []byte {
				rh := dnsmessage.Header{ID: id, Response: true, RCode: dnsmessage.RCodeSuccess}
				name := q.Name.String()
				if name != "ok.example." && name != "late.example." {
					rh.RCode = dnsmessage.RCodeNameError
				}
				b := dnsmessage.NewBuilder(nil, rh)
				b.StartQuestions()
				b.Question(q)
				b.StartAnswers()
				if rh.RCode == dnsmessage.RCodeSuccess && q.Type == dnsmessage.TypeA {
					b.CNAMEResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60},
						dnsmessage.CNAMEResource{CNAME: q.Name})
					b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60},
						dnsmessage.AResource{A: [4]byte{192, 0, 2, 1}})
				}
				m, _ := b.Finish()
				return m
			}
			if q.Name.String() == "late.example." {
				pc.WriteTo(reply(h.ID+1), from)
			}
			pc.WriteTo(reply(h.ID), from)
		}
	}()
	return addrPort(t, pc.LocalAddr())
}

func TestProbeDNS(t *testing.T) {
	for _, host := range loopbacks {
		addr := serveDNS(t, host)
		wantPass(t, "dns A ok.example", probe(t, addr, Spec{Type: "dns", Query: "ok.example"}))
		wantPass(t, "dns A late.example", probe(t, addr, Spec{Type: "dns", Query: "late.example."}))
		wantFail(t, "dns A missing.example", probe(t, addr, Spec{Type: "dns", Query: "missing.example"}), "dns: rcode NXDOMAIN")
		wantFail(t, "dns AAAA ok.example", probe(t, addr, Spec{Type: "dns", Query: "ok.example", Record: "aaaa"}), "dns: no AAAA answer")
		closed := closedPort(t, "udp", host)
		wantFail(t, "dns closed", probe(t, closed, Spec{Type: "dns", Query: "ok.example"}), "dns "+closed.String()+": port unreachable")
	}
}

// serveUDP echoes datagrams on host, and answers none starting "quiet".
func serveUDP(t *testing.T, host string) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if !bytes.HasPrefix(buf[:n], []byte("quiet")) {
				pc.WriteTo(buf[:n], from)
			}
		}
	}()
	return addrPort(t, pc.LocalAddr())
}

func TestProbeUDP(t *testing.T) {
	for _, host := range loopbacks {
		addr := serveUDP(t, host)
		wantPass(t, "udp echo", probe(t, addr, Spec{Type: "udp", Send: "ping"}))
		wantPass(t, "udp echo expect", probe(t, addr, Spec{Type: "udp", Send: "hex:00706f6e6700", ExpectBytes: "pong"}))
		wantPass(t, "udp echo expect hex", probe(t, addr, Spec{Type: "udp", Send: "a pong", ExpectBytes: "hex:706f6e67"}))
		wantFail(t, "udp echo wrong", probe(t, addr, Spec{Type: "udp", Send: "ping", ExpectBytes: "pong"}),
			"udp "+addr.String()+": reply without expect_bytes")
		wantFail(t, "udp no reply", probe(t, addr, Spec{Type: "udp", Send: "quiet", Interval: "1s", Timeout: "200ms"}), "timeout after 200ms")
		closed := closedPort(t, "udp", host)
		wantFail(t, "udp closed", probe(t, closed, Spec{Type: "udp", Send: "ping"}), "udp "+closed.String()+": port unreachable")
	}
}

// script writes an executable shell script into dir.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func currentUser(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

func TestProbeExec(t *testing.T) {
	dir := t.TempDir()
	me := currentUser(t)
	env := script(t, dir, "env.sh", `[ "$LVS_RS_ADDRESS" = 10.0.0.2 ] && [ "$LVS_RS_PORT" = 8080 ] &&
[ "$LVS_VIP" = 192.0.2.1 ] && [ "$LVS_VPORT" = 80 ] && [ "$EXTRA" = "x y" ] && [ "$1" = "a b" ] && [ $# = 1 ]`)
	fail := script(t, dir, "fail.sh", "exit 3")
	target := func(cmd ...string) Target {
		return Target{
			Addr: netip.MustParseAddrPort("10.0.0.2:8080"), VIP: netip.MustParseAddrPort("192.0.2.1:80"),
			Env:  map[string]string{"EXTRA": "x y"},
			Spec: Spec{Type: "exec", Command: cmd, User: me},
		}
	}
	ctx := context.Background()
	wantPass(t, "exec env.sh", Probe(ctx, target(env, "a b")))
	wantFail(t, "exec env.sh, two arguments", Probe(ctx, target(env, "a", "b")), "exec: exit status 1")
	wantFail(t, "exec fail.sh", Probe(ctx, target(fail)), "exec: exit status 3")
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(data, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wantFail(t, "exec of a data file", Probe(ctx, target(data)), "exec: start "+data+": permission denied")
	tgt := target(env)
	tgt.Spec.User = "no-such-user"
	if os.Geteuid() == 0 {
		wantFail(t, "exec as an unknown user", Probe(ctx, tgt), `exec: user "no-such-user": no such user`)
	} else {
		wantFail(t, "exec as an unknown user (not root: runs as self)", Probe(ctx, tgt), "exec: exit status 1")
	}
}

// TestProbeExecUser: run as root, the command runs as the check's user
// (nobody by default); otherwise as the running user.
func TestProbeExecUser(t *testing.T) {
	dir := t.TempDir()
	// nobody must reach the script.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	id := script(t, dir, "id.sh", `[ "$(id -u)" = "$WANT_UID" ] && [ "$(id -g)" = "$WANT_GID" ] && [ "$(id -G)" = "$WANT_GID" ]`)
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 {
		u, g, err := lookupUser("nobody")
		if err != nil {
			t.Fatal(err)
		}
		uid, gid = int(u), int(g)
	}
	tgt := Target{Addr: netip.MustParseAddrPort("127.0.0.1:1"), Spec: Spec{Type: "exec", Command: []string{id}},
		Env: map[string]string{"WANT_UID": strconv.Itoa(uid), "WANT_GID": strconv.Itoa(gid)}}
	if os.Geteuid() != 0 {
		// Not root: the running user, with its own groups.
		tgt.Spec.Command = []string{"/bin/sh", "-c", `[ "$(id -u)" = "$WANT_UID" ] && [ "$(id -g)" = "$WANT_GID" ]`}
	}
	wantPass(t, "exec as uid "+strconv.Itoa(uid), Probe(context.Background(), tgt))
}

// TestProbeExecTimeoutKillsGroup: at the timeout the whole process group
// goes, children included. Real clock: real processes.
func TestProbeExecTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	hang := script(t, dir, "hang.sh", `sleep 60 & echo $! > "$PID_FILE"; wait`)
	tgt := Target{Addr: netip.MustParseAddrPort("127.0.0.1:1"), Env: map[string]string{"PID_FILE": pidFile},
		Spec: Spec{Type: "exec", Command: []string{hang}, User: currentUser(t), Interval: "2s", Timeout: "300ms"}}
	wantFail(t, "exec hang.sh", Probe(context.Background(), tgt), "timeout after 300ms")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	deadline := time.Now().Add(20 * time.Second) // a bound on a hung test
	for {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		// Gone, or a zombie nobody has reaped yet: killed either way.
		if err != nil || strings.Contains(string(stat), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the script's child %s still runs: %s", pid, stat)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
