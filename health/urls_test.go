package health

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestProbeHTTPURLs: a check's urls are requested in turn, and the first
// failure ends the probe (keepalived's check_http.c: epilog moves to the
// next url only after one passes, and any url failing takes the server
// out). A digest is the MD5 of the body (http_handle_response), any of
// those listed passes, and a body beyond maxDigestBody fails.
func TestProbeHTTPURLs(t *testing.T) {
	var gets atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/alpha":
			w.Write([]byte("alpha"))
		case "/beta":
			gets.Add(1)
			w.Write([]byte("beta"))
		case "/fail":
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("alpha"))
		case "/big":
			w.Write([]byte(strings.Repeat("x", maxDigestBody+1)))
		case "/limit":
			w.Write([]byte(strings.Repeat("x", maxDigestBody)))
		}
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	addr := addrPort(t, ln.Addr())
	alpha, beta := md5hex("alpha"), md5hex("beta")
	check := func(urls ...URL) error {
		t.Helper()
		return probe(t, addr, Spec{Type: "http", URLs: urls})
	}

	wantPass(t, "one url with its digest", check(URL{Path: "/alpha", Digest: []string{alpha}}))
	wantPass(t, "digest in capitals", check(URL{Path: "/alpha", Digest: []string{strings.ToUpper(alpha)}}))
	wantPass(t, "one of two digests", check(URL{Path: "/alpha", Digest: []string{beta, alpha}}))
	wantFail(t, "wrong digest", check(URL{Path: "/alpha", Digest: []string{beta}}),
		"http /alpha: body digest "+alpha+", want "+beta)
	wantFail(t, "neither digest", check(URL{Path: "/beta", Digest: []string{alpha, md5hex("x")}}),
		"http /beta: body digest "+beta+", want "+alpha+" or "+md5hex("x"))
	// The status comes first: a body with the digest and a bad status fails.
	wantFail(t, "status before digest", check(URL{Path: "/fail", Digest: []string{alpha}}), "http /fail: status 503, want 200-399")
	wantPass(t, "a body of MaxDigestBody", check(URL{Path: "/limit", Digest: []string{md5hex(strings.Repeat("x", maxDigestBody))}}))
	wantFail(t, "a body beyond MaxDigestBody", check(URL{Path: "/big", Digest: []string{alpha}}),
		"http /big: body over 1048576 bytes: no digest")

	gets.Store(0)
	wantPass(t, "two urls", check(URL{Path: "/alpha", Digest: []string{alpha}}, URL{Path: "/beta", Expect: "200"}))
	if n := gets.Load(); n != 1 {
		t.Errorf("two urls: /beta requested %d times, want 1", n)
	}
	gets.Store(0)
	wantFail(t, "the first fails", check(URL{Path: "/fail"}, URL{Path: "/beta"}), "http /fail: status 503, want 200-399")
	if n := gets.Load(); n != 0 {
		t.Errorf("the first url failed: /beta requested %d times, want none", n)
	}
	wantFail(t, "the second fails", check(URL{Path: "/beta"}, URL{Path: "/fail", Expect: "200"}), "http /fail: status 503, want 200")
	wantPass(t, "a url expecting 503", check(URL{Path: "/beta"}, URL{Path: "/fail", Expect: "503"}))
	// The single path form reads as before.
	wantFail(t, "path form", probe(t, addr, Spec{Type: "http", Path: "/fail"}), "http: status 503, want 200-399")
}

// TestProbeExecDynamic: a dynamic exec check passes on exit status 0 at
// the file's weight (nil), fails on 1, and passes on 2 to 255 with weight
// status-2 (keepalived's check_misc.c misc_check_child_thread); without
// dynamic, any status but 0 fails.
func TestProbeExecDynamic(t *testing.T) {
	dir := t.TempDir()
	me := currentUser(t)
	exit := script(t, dir, "exit.sh", `exit "$1"`)
	probeExit := func(dynamic bool, status string) error {
		return Probe(context.Background(), Target{Addr: netip.MustParseAddrPort("10.0.0.2:80"),
			Spec: Spec{Type: "exec", Command: []string{exit, status}, User: me, Dynamic: dynamic}})
	}
	for _, tc := range []struct {
		status string
		weight int // -1: a plain pass; -2: a failure
	}{{"0", -1}, {"1", -2}, {"2", 0}, {"7", 5}, {"255", 253}} {
		err := probeExit(true, tc.status)
		switch {
		case tc.weight == -1:
			wantPass(t, "dynamic, exit "+tc.status, err)
		case tc.weight == -2:
			wantFail(t, "dynamic, exit "+tc.status, err, "exec: exit status 1")
		default:
			w := weightOf(err)
			if !passed(err) || w == nil || int(*w) != tc.weight {
				t.Errorf("dynamic, exit %s: %v, want a pass at weight %d", tc.status, err, tc.weight)
			}
		}
	}
	wantFail(t, "not dynamic, exit 7", probeExit(false, "7"), "exec: exit status 7")
	if passed(probeExit(false, "7")) {
		t.Error("not dynamic, exit 7: Passed")
	}
}
