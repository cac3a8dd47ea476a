package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestEchoServerAndClients(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln := listen(t)
	go serveEcho(ctx, "rs1", nil, ln)
	addr := ln.Addr().String()

	tally := httpGetN(addr, 3)
	if tally.ByServer["rs1"] != 3 || len(tally.Errors) != 0 || tally.Remotes[addr] != 3 {
		t.Fatalf("tally %+v", tally)
	}
	if f := tally.First; f.ServerLocal != addr || f.ServerRemote != f.ClientLocal || f.ClientRemote != addr {
		t.Errorf("addresses do not match each other's view: %+v", f)
	}

	var out bytes.Buffer
	err := keepAliveLoop(addr, bufio.NewScanner(strings.NewReader("get\nget\nquit\n")), json.NewEncoder(&out))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("keepalive printed %d lines, want 3:\n%s", len(lines), out.String())
	}
	var a1, a2 httpAnswer
	json.Unmarshal([]byte(lines[1]), &a1)
	json.Unmarshal([]byte(lines[2]), &a2)
	if a1.Server != "rs1" || a1.ClientLocal != a2.ClientLocal {
		t.Errorf("keepalive answers %+v and %+v: want rs1 twice over one connection", a1, a2)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEchoReportsOnlyClosesNobodyAskedFor: the echo server's close after a
// "Connection: close" request (every httpGetN request) is the protocol, not a
// report; a connection it drops on its own (here, after a malformed
// request) is reported. Real clock: real connections.
func TestEchoReportsOnlyClosesNobodyAskedFor(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln := listen(t)
	var closes syncBuffer
	go serveEcho(ctx, "rs1", &closes, ln)
	addr := ln.Addr().String()
	if tally := httpGetN(addr, 5); tally.ByServer["rs1"] != 5 {
		t.Fatalf("tally %+v", tally)
	}
	conn, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("NOT HTTP\r\n\r\n"))
	io.ReadAll(conn) // the server answers 400 and closes
	// The report follows the close: a poll, 5 s at most (a bound on a hung
	// test).
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(closes.String(), "closed the connection from "+conn.LocalAddr().String()+" first") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSpace(closes.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], conn.LocalAddr().String()) {
		t.Errorf("reports %q: want one, for the dropped connection from %s", lines, conn.LocalAddr())
	}
}

func TestGetCountsFailures(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	tally := httpGetN(addr, 2)
	if len(tally.Errors) != 2 || len(tally.ByServer) != 0 {
		t.Errorf("tally against a closed port: %+v", tally)
	}
}

func TestFTPPassiveDownload(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	content := fileContent(300_000)
	ln := listen(t)
	go serveFTP(ctx, "rs2", ln, content)
	res, err := ftpGet(ln.Addr().String(), ftpFile)
	if err != nil {
		t.Fatal(err)
	}
	if res.Size != len(content) || res.SHA256 != sha256Hex(content) {
		t.Errorf("downloaded %d bytes, sha256 %s; want %d, %s", res.Size, res.SHA256, len(content), sha256Hex(content))
	}
	if !strings.HasPrefix(res.PASVReply, "227 Entering Passive Mode (127,0,0,1,") || !strings.HasPrefix(res.DataAddr, "127.0.0.1:") {
		t.Errorf("PASV reply %q, data address %q", res.PASVReply, res.DataAddr)
	}
	if _, err := ftpGet(ln.Addr().String(), "nope"); err == nil {
		t.Error("downloading a missing file succeeded")
	}
}

func TestFileContentIsDeterministicAndVaried(t *testing.T) {
	a, b := fileContent(1000), fileContent(1000)
	if !bytes.Equal(a, b) || len(a) != 1000 {
		t.Fatal("fileContent is not deterministic")
	}
	if bytes.Equal(a[:32], a[32:64]) {
		t.Error("fileContent repeats itself")
	}
}

func TestRunRoleRejectsUnknownRoles(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runRoleStatus("nope", nil, strings.NewReader(""), &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "unknown role") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
}

// TestUDPEchoAndFlow stays on the real clock: the datagrams are real.
func TestUDPEchoAndFlow(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- serveUDPEcho(ctx, "rs1", pc) }()
	f, err := dialUDPFlow("127.0.0.1:0", pc.LocalAddr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 2 {
		if a, err := f.Ping(); err != nil || a.Server != "rs1" {
			t.Fatalf("ping: %+v, %v", a, err)
		}
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serveUDPEcho: %v", err)
		}
	case <-time.After(10 * time.Second): // a bound on a hung test
		t.Fatal("serveUDPEcho still runs 10 s after its context ended")
	}
	quiet, err := dialUDPFlow("127.0.0.1:0", pc.LocalAddr().String(), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	if a, err := quiet.Ping(); err == nil && a.Server != "" {
		t.Errorf("a stopped server answered: %+v", a)
	}
}
