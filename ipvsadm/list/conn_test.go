package list_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/ipvsadm/list"
)

// writeProc writes a connection-table file for Connections to read.
func writeProc(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ip_vs_conn")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// withExpiries returns the proc text with each connection's expiry replaced
// by the one a listing shows (the golden listings were taken a moment
// after the proc file was dumped, so a countdown may have moved on).
func withExpiries(t *testing.T, proc, listing string) string {
	t.Helper()
	procLines := strings.Split(strings.TrimSuffix(proc, "\n"), "\n")
	listLines := strings.Split(strings.TrimSuffix(listing, "\n"), "\n")[2:]
	if len(listLines) != len(procLines)-1 {
		t.Fatalf("listing has %d connections, proc file %d", len(listLines), len(procLines)-1)
	}
	for i, l := range listLines {
		mm, ss, _ := strings.Cut(strings.Fields(l)[1], ":")
		m, _ := strconv.Atoi(mm)
		s, _ := strconv.Atoi(ss)
		f := strings.Fields(procLines[i+1])
		f[8] = strconv.Itoa(m*60 + s)
		procLines[i+1] = strings.Join(f, " ")
	}
	return strings.Join(procLines, "\n") + "\n"
}

// TestGoldenConnections replays r4's -L -c listings from the proc file
// recorded in the same run (r4/005) and the empty table of r4/001.
func TestGoldenConnections(t *testing.T) {
	r := goldenResolver()
	proc := readGolden(t, "r4/005").out
	cases := []struct {
		name            string
		numeric, persis bool
	}{
		{"r4/006", true, false},
		{"r4/007", false, false},
		{"r4/008", true, true},
		{"r4/009", true, false}, // --nosort --exact --tun-info change nothing
	}
	for _, c := range cases {
		want := readGolden(t, c.name).out
		path := writeProc(t, withExpiries(t, proc, want))
		var got bytes.Buffer
		err := list.Connections(&got, path, c.persis, list.Options{Numeric: c.numeric, NoSort: true, Exact: true, Resolver: r})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.String() != want {
			t.Errorf("%s differs:\n%s", c.name, diffLines(want, got.String()))
		}
	}

	// r4/001: an empty table, listed without and with --persistent-conn,
	// then the proc file itself.
	empty := readGolden(t, "r4/001").out
	lines := strings.SplitAfter(empty, "\n")
	path := writeProc(t, lines[4])
	var got bytes.Buffer
	for _, persist := range []bool{false, true} {
		if err := list.Connections(&got, path, persist, list.Options{Resolver: r}); err != nil {
			t.Fatal(err)
		}
	}
	got.WriteString(lines[4])
	if got.String() != empty {
		t.Errorf("r4/001 differs:\n%s", diffLines(empty, got.String()))
	}
}

func TestConnectionsErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nonexistent")
	var out bytes.Buffer
	err := list.Connections(&out, missing, false, list.Options{Numeric: true})
	if err == nil || err.Error() != "cannot open file "+missing || out.Len() != 0 {
		t.Errorf("missing file: %v, output %q", err, out.String())
	}
	empty := writeProc(t, "")
	err = list.Connections(&out, empty, false, list.Options{Numeric: true})
	if err == nil || err.Error() != "unexpected input from "+empty || out.Len() != 0 {
		t.Errorf("empty file: %v, output %q", err, out.String())
	}
	// A blank line makes ipvsadm exit(1) silently, after the lines before it.
	blank := writeProc(t, "header\nTCP 0A000001 0050 0A000002 0050 0A000003 0050 ESTABLISHED 61\n\nTCP 0A000001 0050 0A000002 0050 0A000003 0050 ESTABLISHED 61\n")
	out.Reset()
	err = list.Connections(&out, blank, false, list.Options{Numeric: true})
	if !errors.Is(err, list.ErrSilent) {
		t.Errorf("blank line: err = %v, want ErrSilent", err)
	}
	want := "IPVS connection entries\npro expire state       source             virtual            destination\n" +
		"TCP 01:01  ESTABLISHED 10.0.0.1:80        10.0.0.2:80        10.0.0.3:80\n"
	if out.String() != want {
		t.Errorf("blank line: output\n%q\nwant\n%q", out.String(), want)
	}
}

func TestConnectionsLineForms(t *testing.T) {
	long := strings.Repeat("x", 300)
	proc := "Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData\n" +
		// Tunnelled to an IPv6 real server; no PE.
		"TCP 0A000001 0050 0A000002 01BB 2001:0db8:0000:0000:0000:0000:0000:00a0 01BB ESTABLISHED 7200\n" +
		// Dotted and IPv4-compatible IPv6 forms, unknown protocol: no names.
		"XYZ 10.0.0.1 0035 10.0.0.2 0035 ::0102:0304 0035 NONE 5\n" +
		// PE data: shown only with --persistent-conn.
		"UDP 0A000001 13C4 0A000002 13C4 0A000009 13C4 NONE 59 sip abc@host\n" +
		// A line longer than 255 bytes is read in pieces; the rest of it is
		// parsed as a line of its own, keeping the fields it lacks.
		"UDP 0A000001 0000 0A000002 13C4 0A000009 13C4 NONE 1 sip " + long + "\n"
	path := writeProc(t, proc)
	r := goldenResolver()
	var got bytes.Buffer
	if err := list.Connections(&got, path, true, list.Options{Resolver: r}); err != nil {
		t.Fatal(err)
	}
	firstPiece := ("UDP 0A000001 0000 0A000002 13C4 0A000009 13C4 NONE 1 sip " + long)[:255]
	pe1 := firstPiece[len("UDP 0A000001 0000 0A000002 13C4 0A000009 13C4 NONE 1 sip "):]
	want := "IPVS connection entries\n" +
		"pro expire state       source             virtual            destination        pe name          pe_data\n" +
		"TCP 120:00 ESTABLISHED vip1.example.com:http vip2:https         [rs6]:https\n" +
		"XYZ 00:05  NONE        vip1.example.com:53 vip2:53            [::1.2.3.4]:53\n" +
		"UDP 00:59  NONE        vip1.example.com:sip vip2:sip           10.0.0.9:sip     sip                abc@host\n" +
		"UDP 00:01  NONE        vip1.example.com:0 vip2:sip           10.0.0.9:sip     sip                " + pe1 + "\n" +
		// The remainder of the long line becomes the protocol (unknown, so
		// numeric ports); every other field keeps the previous line's value,
		// and with one field read the pe columns are not shown.
		strings.Repeat("x", 300-len(pe1)) + " 00:01  NONE        vip1.example.com:0 vip2:5060          10.0.0.9:5060\n"
	if got.String() != want {
		t.Errorf("differs:\n%s", diffLines(want, got.String()))
	}
}
