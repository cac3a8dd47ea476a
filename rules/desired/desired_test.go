package desired

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/lvskit/lvskit/rules"
)

const rich = `# comment lines and blank lines are skipped

-A -t 10.0.0.1:80 -s wrr -p 600 -M 255.255.255.0
-a -t 10.0.0.1:80 -r 192.168.1.2:80 -m -w 3 -x 100 -y 10
ipvsadm -a -t 10.0.0.1:80 -r 192.168.1.3 -g -w 0
-A -u [2001:db8::1]:53 -s mh -b mh-fallback,mh-port -o
-a -u [2001:db8::1]:53 -r [2001:db8:1::3]:53 -i -w 1 --tun-type gue --tun-port 6080 --tun-remcsum
-a -u [2001:db8::1]:53 -r [2001:db8:1::2]:53 -i -w 1 --tun-type gre --tun-csum
-A -f 7 -6 -s sh -b sh-port -p 60 -M 64
-a -f 7 -6 -r [2001:db8:1::9]:0 -g -w 2
-A -f 2147483648 -s rr
-a -f 2147483648 -r 10.0.0.9 -i -w 1
`

func TestTextToJSONAndBack(t *testing.T) {
	set, err := ReadText("rich", []byte(rich), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Services) != 4 || len(set.Services[0].Dests) != 2 || set.Services[0].Dests[1].Port != 80 {
		t.Fatalf("read %+v", set)
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, set, Counters{Conns: true, Stats: true, Rate: true}); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON("json", b.Bytes(), nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	// The same rules: a plan from one to the other is empty (mh order
	// aside, which JSON carries and text does not).
	if p := rules.Diff(asKernel(set), back, rules.DiffOptions{KeepMHOrder: true}); !p.InSync() {
		t.Errorf("text -> JSON -> set changed the rules: %+v\n%s", p.Changes, b.String())
	}
	if p := rules.Diff(asKernel(back), set, rules.DiffOptions{KeepMHOrder: true}); !p.InSync() {
		t.Errorf("JSON -> set differs from the text: %+v", p.Changes)
	}
	for _, want := range []string{`"fwmark": 2147483648`, `"checksum": "remcsum"`, `"netmask": "64"`, `"netmask": "255.255.255.0"`, `"one_packet": true`, `"upper_threshold": 100`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

// asKernel is a set as a kernel read would give it (destinations in list
// order, newest first, for the canonical order).
func asKernel(s *rules.Set) *rules.Set {
	out := &rules.Set{}
	for _, svc := range s.Services {
		c := svc
		c.Dests = append([]rules.Dest(nil), svc.Dests...)
		out.Services = append(out.Services, c)
	}
	return out
}

func TestErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"-A -t 10.0.0.1:80\n-a -t 10.0.0.1:80 -r 10.0.0.2 -w x\n", "f:2: illegal weight specified"},
		{"-A -t 10.0.0.1:80\n-E -t 10.0.0.1:80 -s rr\n", "f:2: only -A (add service) and -a (add server) lines describe a rule set, not edit-service"},
		{"-A -t 10.0.0.1:0\n", "f:1: Zero port specified for non-persistent service"},
		{"-A -t 10.0.0.1:80\xff\n", "f:1: not valid UTF-8"},
		{"# caf\xe9\n", "f:1: not valid UTF-8"},
		{"# café\n-A -t 10.0.0.1:80\x00 -s rr\n", "f:2: NUL byte in the line"},
		{"-A -t 10.0.0.1:80\n\x00\n", "f:2: NUL byte in the line"},
		{"{\"version\": 3, \"services\": []}", "f:1: \"version\": 3, but this lvsctl reads versions 1 and 2"},
		{"{\"version\": 1, \"services\": [\n{\"protocol\": \"tcp\", \"address\": \"10.0.0.1\", \"port\": 80, \"family\": \"inet\", \"scheduler\": \"rr\",\n\"persistence\": {\"timeout\": 0}, \"destinations\": []}]}", "f:3: invalid timeout value `0' specified"},
		{"{\"version\": 1, \"services\": [\n{\"protocol\": \"tcp\", \"address\": \"example.com\", \"port\": 80, \"family\": \"inet\", \"scheduler\": \"rr\", \"destinations\": []}]}", "f:2: service 1: address \"example.com\": not an IP address"},
		{"{\"version\": 1, \"services\": [\n{\"protocol\": \"tcp\", \"address\": \"10.0.0.1\", \"port\": 80,\n \"weight\": \"x\"}]}", "f:3: unknown field \"weight\""},
	} {
		_, _, err := Read("f", strings.NewReader(tc.text), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.want)
		}
	}
}

// oneByteReader hands out its input a byte at a time, as a slow pipe.
type oneByteReader struct{ b []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	p[0], r.b = r.b[0], r.b[1:]
	return 1, nil
}

// TestReadFromReadsLikeRead: reading a stream a line at a time gives the
// set reading the whole file gives, and the same errors, for inputs that
// cross the reader's chunks and buffers: a service with more destinations
// than a chunk holds, services whose lines interleave, a line longer than
// the buffer, JSON, no final newline.
func TestReadFromReadsLikeRead(t *testing.T) {
	var big strings.Builder
	big.WriteString("-A -t 10.0.0.1:80 -s rr\n")
	for i := range destChunk + 10 {
		// With a port: most lines are read by the template of the line
		// before (cmdline.LineTemplate), across the reader's buffers.
		fmt.Fprintf(&big, "-a -t 10.0.0.1:80 -r 10.%d.%d.%d:80 -g\n", i>>16, (i>>8)&255, i&255)
	}
	big.WriteString("-A -t 10.0.0.2:80\n-a -t 10.0.0.2:80 -r 10.9.9.9\n-a -t 10.0.0.1:80 -r 10.9.9.9\n-a -t 10.0.0.2:80 -r 10.9.9.8")
	long := "# " + strings.Repeat("x", 100<<10) + "\n-A -t 10.0.0.3:80\n"
	inputs := map[string]string{
		"rich": rich, "chunks and interleaving": big.String(), "long comment": long,
		"json": mustJSON(t, rich), "duplicate": "-A -t 10.0.0.9:80\n-a -t 10.0.0.9:80 -r 1.2.3.4\n-a -t 10.0.0.9:80 -r 1.2.3.4\n",
		"bad line": "-A -t 10.0.0.9:80\n-a -t 10.0.0.9:80 -r\n", "empty": "",
		"duplicate after the template":   "-A -t 10.0.0.9:80\n-a -t 10.0.0.9:80 -r 1.2.3.4:80 -m\n-a -t 10.0.0.9:80 -r 1.2.3.5:80 -m\n-a -t 10.0.0.9:80 -r 1.2.3.4:80 -m\n",
		"bad address after the template": "-A -t 10.0.0.9:80\n-a -t 10.0.0.9:80 -r 1.2.3.4:80 -m\n-a -t 10.0.0.9:80 -r 1.2.3.5:80 -m\n-a -t 10.0.0.9:80 -r 1.2.3.256:80 -m\n",
		"family after the template":      "-A -t 10.0.0.9:80\n-a -t 10.0.0.9:80 -r 1.2.3.4:80 -m\n-a -t 10.0.0.9:80 -r [2001:db8::1]:80 -m\n",
	}
	for name, in := range inputs {
		want, _, wantErr := Read(name, strings.NewReader(in), nil)
		for _, rd := range []io.Reader{strings.NewReader(in), &oneByteReader{[]byte(in)}} {
			got, err := readFrom(name, rd, nil)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Errorf("%s: ReadFrom error %v, Read error %v", name, err, wantErr)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: ReadFrom and Read read different sets", name)
			}
		}
	}
	// The large service's destinations crossed a chunk: all there, in
	// file order; the interleaved line landed in the right service.
	set, _, _ := Read("chunks", strings.NewReader(big.String()), nil)
	ds := set.Services[0].Dests
	if n := len(ds); n != destChunk+11 {
		t.Fatalf("the large service has %d destinations, want %d", n, destChunk+11)
	}
	for i := range destChunk + 10 {
		if want := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}); ds[i].Addr != want || ds[i].Line != int32(i+2) {
			t.Fatalf("destination %d: %v (line %d), want %v (line %d)", i, ds[i].Addr, ds[i].Line, want, i+2)
		}
	}
	if last := ds[len(ds)-1].Addr.String(); last != "10.9.9.9" {
		t.Errorf("the interleaved destination: %s", last)
	}
	if n := len(set.Services[1].Dests); n != 2 {
		t.Errorf("the second service has %d destinations, want 2", n)
	}
	if _, err := readFrom("broken", iotest.ErrReader(errors.New("disk on fire")), nil); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("a read error: %v", err)
	}
	// Lines the template reads name their line in errors.
	for name, want := range map[string]string{
		"duplicate after the template":   "duplicate after the template:4: destination 1.2.3.4:80 of -t 10.0.0.9:80 given again (first at duplicate after the template:2)",
		"bad address after the template": "bad address after the template:4:",
		"family after the template":      "family after the template:3: Different address family is allowed only for tunneling servers",
	} {
		if _, _, err := Read(name, strings.NewReader(inputs[name]), nil); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %v, want %s", name, err, want)
		}
	}
}

func mustJSON(t *testing.T, text string) string {
	t.Helper()
	set, err := ReadText("rich", []byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteJSON(&b, set, Counters{}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestReadGroupsLikeAMap: for random files whose destination lines come
// anywhere after their service's line, the reader (with its shortcuts for
// lines that come together, and the template that reads lines alike)
// gives each service the destinations a plain map from service key to
// lines gives, in file order, each with its line number.
func TestReadGroupsLikeAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		var lines []string
		want := map[string][]string{}  // service address -> destination addresses
		wantLine := map[string]int32{} // service and destination address -> line
		var order []string
		for range rng.IntN(12) {
			if len(order) == 0 || rng.IntN(3) == 0 {
				vip := fmt.Sprintf("10.0.%d.%d:80", rng.IntN(2), len(order)+1)
				order = append(order, vip)
				lines = append(lines, "-A -t "+vip+" -s rr")
				continue
			}
			for range 1 + rng.IntN(5) {
				vip := order[len(order)-1]
				if rng.IntN(3) == 0 {
					vip = order[rng.IntN(len(order))]
				}
				rs := fmt.Sprintf("192.168.%d.%d", len(want[vip]), rng.IntN(250)+1)
				want[vip] = append(want[vip], rs)
				wantLine[vip+" "+rs] = int32(len(lines) + 1)
				if rng.IntN(2) == 0 {
					rs += ":80" // read by the template of the line before when it is alike
				}
				lines = append(lines, "-a -t "+vip+" -r "+rs+" -g")
			}
		}
		text := strings.Join(lines, "\n")
		set, err := ReadText("random", []byte(text), nil)
		if err != nil {
			t.Fatalf("round %d: %v\n%s", round, err, text)
		}
		if len(set.Services) != len(order) {
			t.Fatalf("round %d: %d services, want %d", round, len(set.Services), len(order))
		}
		for i, s := range set.Services {
			var got []string
			for _, d := range s.Dests {
				got = append(got, d.Addr.String())
				if l := wantLine[order[i]+" "+d.Addr.String()]; d.Line != l {
					t.Fatalf("round %d: %s -r %s read at line %d, written at %d\n%s", round, order[i], d.Addr, d.Line, l, text)
				}
			}
			if vip := netip.AddrPortFrom(s.Addr, s.Port).String(); vip != order[i] || !slices.Equal(got, want[vip]) {
				t.Fatalf("round %d: service %d is %s with %v, want %s with %v\n%s", round, i, vip, got, order[i], want[order[i]], text)
			}
		}
	}
}

// TestTemplatesReadLikeWords: a file read with the reader's line
// templates (cmdline.LineTemplate: lines alike but for their addresses,
// across services) gives the set, errors and line numbers that reading
// every line by its words gives. Each line ending in a blank other than
// its neighbour's defeats the templates, whose bytes around the values
// must be equal: the same words, each line read by ParseFast or Parse.
// (The blank alternates between the lines of each kind, as each kind has
// its own template.)
func TestTemplatesReadLikeWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 2026))
	// Addresses: mostly distinct ones of a kind, and near misses of
	// each sort (other families, ports zero or missing, bad, repeated).
	pick := func(odd []string, format string) string {
		if rng.IntN(4) == 0 {
			return odd[rng.IntN(len(odd))]
		}
		return fmt.Sprintf(format, rng.IntN(256), 1+rng.IntN(254))
	}
	vips := []string{"10.0.0.3:443", "10.0.0.4:0", "10.0.0.5", "[2001:db8::1]:80", "[2001:db8::2]:0", "10.0.0.256:80", "10.0.0.1:80"}
	rips := []string{"192.168.1.2:8080", "192.168.1.3:0", "192.168.1.4", "[2001:db8:1::1]:80", "192.168.1.300:80", "192.168.1.1:80"}
	marks := []string{"0", "07", "4294967295", "4294967296", "12x", "1"}
	templated := 0
	for n := range 3000 {
		proto := []string{"-t", "-u", "-f"}[rng.IntN(3)]
		opts := []string{" -s wlc", " -s rr -p 60", " -s mh -p", " -s sh -M 255.255.255.0", ""}[rng.IntN(5)]
		method := " " + []string{"-m", "-g", "-i"}[rng.IntN(3)] + " -w " + []string{"0", "1"}[rng.IntN(2)]
		var lines []string
		for range 1 + rng.IntN(5) {
			vip := pick(vips, "10.%d.0.%d:80")
			if proto == "-f" {
				vip = pick(marks, "%d%d")
			}
			lines = append(lines, "-A "+proto+" "+vip+opts)
			for range rng.IntN(5) {
				lines = append(lines, "-a "+proto+" "+vip+" -r "+pick(rips, "192.168.%d.%d:80")+method)
			}
		}
		text := strings.Join(lines, "\n") + "\n"
		var words strings.Builder
		kinds := map[byte]int{} // lines of each kind (-A, -a) so far
		for _, l := range lines {
			words.WriteString(l + []string{" ", "\t"}[kinds[l[1]]%2] + "\n")
			kinds[l[1]]++
		}
		want, wantErr := ReadText("f", []byte(words.String()), nil)
		got, err := ReadText("f", []byte(text), nil)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("input %d:\n%s\nread with templates: %v\nby words: %v", n, text, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("input %d:\n%s\nread with templates: %+v\nby words: %+v", n, text, got, want)
		}
		if err == nil {
			templated++
		}
	}
	if templated < 1000 {
		t.Errorf("only %d of the inputs read without an error: the test explores too little", templated)
	}
}
