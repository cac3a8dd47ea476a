package cmdline

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// fastWords are the words the property test builds lines from: everything
// ParseFast accepts, next to near misses of each (other forms of the same
// option, values inet_aton or strtol read differently, names, IPv6,
// options ParseFast leaves to Parse).
var fastWords = []string{
	"-A", "-a", "-E", "-e", "-d", "-D", "-L", "-C", "-R", "ipvsadm",
	"-t", "-u", "-f", "-s", "-p", "-M", "-r", "-w", "-m", "-g", "-i",
	"-x", "-y", "-b", "-6", "-o", "--pe", "-n", "-", "--", "-tm", "-mg", "-w5",
	"-t10.0.0.1:80", "--tcp-service=10.0.0.1:80", "--weight", "-T",
	"10.0.0.1:80", "10.0.0.1", "10.0.0.1:0", "10.0.0.2:80", "0.0.0.0:0", "255.255.255.255:65535",
	"010.0.0.1:80", "10.0.0.256:80", "1.2.3:80", "1.2.3.4.5:80", "10.0.0.1:65536", "10.0.0.1:080",
	"10.0.0.1:http", "10.0.0.1:", ":80", "localhost:80", "[::1]:80", "::1", "0x0a.0.0.1:80", "10.0.0.1:+80",
	"wlc", "rr", "mh", "sed", "WLC", "abcdefghijklmnop", "abcdefghijklmno", "w-lc", "wlc!#:+",
	"0", "1", "5", "360", "65535", "2678400", "2678401", "2147483647", "2147483648",
	"4294967295", "4294967296", "-1", "+5", " 5", "00", "08", "abc", "",
	"255.255.255.255", "255.255.255.0", "255.255.0", "!#:+",
	"[2001:db8::1]:80", "[2001:db8::1]", "[2001:db8::1]:", "[2001:db8::1]80", "[::]:0", "[::ffff:10.0.0.1]:80",
	"[2001:db8::1%eth0]:80", "[2001:DB8::A]:443", "[2001:db8:::1]:80", "[1:2:3:4:5:6:7:8:9]:80", "[]:80",
	"[2001:db8::1]:65536", "[2001:db8::1]:http", "[0001:0db8::1]:80", "[00001::1]:80", "2001:db8::1", "64", "129",
}

// fastGood are values each option of a saved line takes.
var fastGood = map[string][]string{
	"-t": {"10.0.0.1:80", "10.0.0.1", "10.0.0.1:0", "1.2.3.4:65535", "[2001:db8::1]:80", "[::1]:0"},
	"-u": {"10.0.0.1:53", "10.0.0.2", "[2001:db8::2]:53"},
	"-r": {"192.168.1.2:80", "192.168.1.2", "192.168.1.3:8080", "10.0.0.1:0", "[2001:db8:1::2]:80", "[fe80::1]:8080"},
	"-f": {"1", "4294967295", "77"},
	"-s": {"wlc", "rr", "mh", "foo"},
	"-p": {"360", "1", "2678400", ""},
	"-M": {"255.255.255.255", "255.255.255.0", "0.0.0.0"},
	"-w": {"0", "1", "65535", "2147483647"},
}

// TestParseFastAgreesWithParse: on random lines, whenever ParseFast
// accepts, Parse accepts too and builds the same invocation.
func TestParseFastAgreesWithParse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := &Parser{Resolver: testResolver(t)}
	options := []string{"-t", "-u", "-f", "-s", "-p", "-M", "-r", "-w", "-m", "-g", "-i"}
	accepted := 0
	var inv Invocation
	for n := 0; n < 200000; n++ {
		words := []string{[]string{"-A", "-a"}[rng.IntN(2)]}
		if rng.IntN(10) == 0 {
			words[0] = fastWords[rng.IntN(len(fastWords))]
		}
		for range 1 + rng.IntN(5) {
			switch k := rng.IntN(20); {
			case k == 0:
				words = append(words, fastWords[rng.IntN(len(fastWords))])
			default:
				o := options[rng.IntN(len(options))]
				words = append(words, o)
				if good, ok := fastGood[o]; ok {
					v := good[rng.IntN(len(good))]
					if k == 1 {
						v = fastWords[rng.IntN(len(fastWords))]
					}
					if v != "" || o != "-p" {
						words = append(words, v)
					}
				}
			}
		}
		checkFastAgainstParse(t, p, words, &inv, &accepted)
	}
	// Saved lines with one or two words changed, swapped or added.
	for n := 0; n < 100000; n++ {
		words := strings.Fields(savedLines[rng.IntN(len(savedLines))])
		for range 1 + rng.IntN(2) {
			i, j := rng.IntN(len(words)), rng.IntN(len(words))
			switch rng.IntN(4) {
			case 0:
				words[i] = fastWords[rng.IntN(len(fastWords))]
			case 1:
				words[i], words[j] = words[j], words[i]
			case 2:
				words = append(words[:i], words[i+1:]...)
			default:
				o := options[rng.IntN(len(options))]
				words = append(words, o)
				if good, ok := fastGood[o]; ok && good[0] != "" {
					words = append(words, good[rng.IntN(len(good))])
				}
			}
			if len(words) == 0 {
				break
			}
		}
		checkFastAgainstParse(t, p, words, &inv, &accepted)
	}
	if accepted < 10000 {
		t.Errorf("ParseFast accepted only %d random lines: the test explores too little", accepted)
	}
}

// TestParseFastTakesSavedLines: the lines ipvsadm -S -n writes for IPv4
// services and destinations take the fast path.
func TestParseFastTakesSavedLines(t *testing.T) {
	p := &Parser{Resolver: testResolver(t)}
	var inv Invocation
	accepted := 0
	for _, l := range savedLines {
		before := accepted
		checkFastAgainstParse(t, p, strings.Fields(l), &inv, &accepted)
		if accepted == before {
			t.Errorf("%q: ParseFast declined", l)
		}
	}
}

// savedLines are lines as ipvsadm -S -n writes them.
var savedLines = []string{
	"-A -t 10.0.0.1:80 -s wlc",
	"-A -u 10.0.0.1:53 -s rr",
	"-A -t 10.0.0.1:443 -s sh -p 360",
	"-A -t 10.0.0.1:0 -s wrr -p 60 -M 255.255.255.0",
	"-A -f 1 -s mh",
	"-a -t 10.0.0.1:80 -r 192.168.1.2:80 -m -w 1",
	"-a -t 10.0.0.1:80 -r 192.168.1.3:80 -g -w 0",
	"-a -u 10.0.0.1:53 -r 192.168.1.4:53 -i -w 65535",
	"-a -f 1 -r 192.168.1.5:0 -g -w 2",
	"-A -t [2001:db8::1]:80 -s wlc",
	"-A -u [2001:db8::1]:53 -s rr -p 60",
	"-a -t [2001:db8::1]:80 -r [2001:db8:1::1]:80 -m -w 1",
	"-a -t 10.0.0.1:80 -r [2001:db8::a0]:80 -i -w 1",
}

func checkFastAgainstParse(t *testing.T, p *Parser, words []string, inv *Invocation, accepted *int) {
	t.Helper()
	fields := make([][]byte, len(words))
	for i, w := range words {
		fields[i] = []byte(w)
	}
	if !ParseFast(fields, inv) {
		return
	}
	*accepted++
	for _, posix := range []bool{false, true} {
		p.Posix = posix
		want, o := p.Parse(append([]string{"ipvsadm"}, words...))
		if o != nil {
			t.Fatalf("%q: ParseFast accepted, Parse says %+v", words, *o)
		}
		want.Argv = nil
		if !reflect.DeepEqual(*inv, *want) {
			t.Fatalf("%q:\nParseFast %+v\nParse     %+v", words, *inv, *want)
		}
	}
}

// FuzzParseFast: any line, split at blanks, that ParseFast accepts, Parse
// accepts alike.
func FuzzParseFast(f *testing.F) {
	for _, l := range savedLines {
		f.Add(l)
	}
	p := &Parser{Resolver: testResolver(f)}
	f.Fuzz(func(t *testing.T, line string) {
		var inv Invocation
		accepted := 0
		checkFastAgainstParse(t, p, strings.Fields(line), &inv, &accepted)
	})
}

// BenchmarkParseFast against BenchmarkParse: one saved destination line.
func BenchmarkParseFast(b *testing.B) {
	fields := [][]byte{[]byte("-a"), []byte("-t"), []byte("10.0.3.250:80"), []byte("-r"), []byte("192.168.10.250:80"), []byte("-m"), []byte("-w"), []byte("1")}
	var inv Invocation
	b.ReportAllocs()
	for b.Loop() {
		if !ParseFast(fields, &inv) {
			b.Fatal("declined")
		}
	}
}

func BenchmarkParse(b *testing.B) {
	argv := []string{"ipvsadm", "-a", "-t", "10.0.3.250:80", "-r", "192.168.10.250:80", "-m", "-w", "1"}
	p := &Parser{}
	b.ReportAllocs()
	for b.Loop() {
		if _, o := p.Parse(argv); o != nil {
			b.Fatal(o)
		}
	}
}

// TestLineTemplateAgreesWithParseFast: a line that a template matches is
// parsed exactly as ParseFast parses its words, on templates from saved
// lines and from random lines (service lines and destination lines), with
// values of every kind in the service's and the -r value's places, the
// same service and others, and lines around them.
func TestLineTemplateAgreesWithParseFast(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	options := []string{"-t", "-u", "-f", "-s", "-p", "-M", "-w", "-m", "-g", "-i"}
	values := append(append(append([]string{}, fastWords...), fastGood["-r"]...), fastGood["-t"]...)
	randomMark := func() string {
		switch rng.IntN(6) {
		case 0:
			return []string{"0", "00", "4294967296", "99999999999", "-1", "+5", "0x10", "7x", "", "1.5"}[rng.IntN(10)]
		case 1:
			return fmt.Sprintf("0%d", rng.IntN(1000))
		case 2:
			return fmt.Sprint(uint32(rng.Uint64()))
		}
		return fmt.Sprint(1 + rng.IntN(5000))
	}
	randomValue := func() string {
		switch rng.IntN(5) {
		case 0:
			return values[rng.IntN(len(values))]
		case 1:
			return fmt.Sprintf("%d.%d.%d.%d:%d", rng.IntN(300), rng.IntN(256), rng.IntN(256), rng.IntN(256), rng.IntN(70000))
		case 2:
			return fmt.Sprintf("[2001:db8::%x]:%d", rng.IntN(1<<16), rng.IntN(70000))
		case 3:
			return fmt.Sprintf("10.0.%d.%d:%d", rng.IntN(256), rng.IntN(256), rng.IntN(2))
		}
		return fmt.Sprintf("10.0.%d.%d:%d", rng.IntN(256), rng.IntN(256), rng.IntN(100))
	}
	seps := []string{" ", "  ", "\t", " \r ", "\v"}
	join := func(words, between []string, lead, trail string) string {
		var b strings.Builder
		b.WriteString(lead)
		for i, w := range words {
			if i > 0 {
				b.WriteString(between[i-1])
			}
			b.WriteString(w)
		}
		b.WriteString(trail)
		return b.String()
	}
	var tmpl LineTemplate
	var inv, want Invocation
	templates, matched, services, newServices, marks := 0, 0, 0, 0, 0
	for n := 0; n < 20000; n++ {
		// A template: a saved line, or random words around -r or -t.
		var words []string
		if rng.IntN(2) == 0 {
			words = strings.Fields(savedLines[rng.IntN(len(savedLines))])
		} else {
			words = []string{[]string{"-a", "-A"}[rng.IntN(2)]}
			for range rng.IntN(5) {
				o := options[rng.IntN(len(options))]
				words = append(words, o)
				if good, ok := fastGood[o]; ok && good[0] != "" {
					words = append(words, good[rng.IntN(len(good))])
				}
			}
			at := 1 + rng.IntN(len(words))
			o := "-r"
			if words[0] == "-A" || rng.IntN(3) == 0 {
				o = []string{"-t", "-u", "-f"}[rng.IntN(3)]
			}
			words = append(words[:at], append([]string{o, fastGood[o][rng.IntN(len(fastGood[o]))]}, words[at:]...)...)
		}
		between := make([]string, len(words))
		for i := range between {
			between[i] = seps[rng.IntN(len(seps))]
		}
		lead, trail := "", ""
		if rng.IntN(4) == 0 {
			lead = " ipvsadm "
		}
		if rng.IntN(4) == 0 {
			trail = seps[rng.IntN(len(seps))]
		}
		line := []byte(join(words, between, lead, trail))
		fields, _ := splitTestFields(line)
		if !ParseFast(fields, &inv) {
			continue
		}
		tmpl.Set(line, fields, &inv)
		if !tmpl.ok {
			if inv.Command == CmdAddServer || slices.Contains(words, "-t") || slices.Contains(words, "-u") || slices.Contains(words, "-f") {
				t.Fatalf("%q: no template made", line)
			}
			continue
		}
		templates++
		if inv.Command == CmdAddService {
			services++
		}
		for range 8 {
			// The values replaced: the service's or -r's or both.
			next := slices.Clone(words)
			for i := 0; i+1 < len(next); i++ {
				switch next[i] {
				case "-r":
					next[i+1] = randomValue()
				case "-t", "-u":
					if rng.IntN(2) == 0 {
						next[i+1] = randomValue()
					}
				case "-f":
					if rng.IntN(2) == 0 {
						next[i+1] = randomMark()
					}
				}
			}
			text := join(next, between, lead, trail)
			if rng.IntN(10) == 0 {
				text = text[:rng.IntN(len(text)+1)] // cut short
			}
			buf := []byte(text + "\n-a -t 1.2.3.4:80 -r 5.6.7.8:80\n")
			n, got, newService, ok := tmpl.Match(buf)
			f, _ := splitTestFields([]byte(text))
			fastOK := ParseFast(f, &want)
			if !ok {
				continue
			}
			inv = *got
			matched++
			if newService {
				newServices++
				if inv.Service.FWMark != 0 {
					marks++
				}
			}
			if n != len(text) {
				t.Fatalf("template %q, line %q: Match took %d bytes", line, text, n)
			}
			if !fastOK {
				t.Fatalf("template %q, line %q: Match accepted, ParseFast declined", line, text)
			}
			if !reflect.DeepEqual(inv, want) {
				t.Fatalf("template %q, line %q:\nMatch     %+v\nParseFast %+v", line, text, inv, want)
			}
		}
	}
	if templates < 5000 || matched < 20000 || services < 1000 || newServices < 5000 || marks < 1000 {
		t.Errorf("%d templates (%d of services), %d lines matched (%d of another service, %d of another mark): the test explores too little", templates, services, matched, newServices, marks)
	}
}

// TestLineTemplateRefuses: lines Match must leave to the caller.
func TestLineTemplateRefuses(t *testing.T) {
	line := []byte("-a -t 10.0.0.1:80 -r 192.168.1.2:80 -m -w 1")
	tmpl, fields, inv := templateOf(t, line)
	for _, s := range []string{
		"-a -t 10.0.0.1:80 -r 192.168.1.3:80 -m -w 1",        // no newline in the buffer
		"-a -t [2001:db8::1]:80 -r 192.168.1.3:80 -m -w 1\n", // a service of another family
		"-a -t 10.0.0.2:0 -r 192.168.1.3:80 -m -w 1\n",       // a service's port zero where the template's is not
		"-a -t 10.0.0.2 -r 192.168.1.3:80 -m -w 1\n",         // a service without a port
		"-a -u 10.0.0.2:80 -r 192.168.1.3:80 -m -w 1\n",      // another protocol
		"-a -t 10.0.0.2:80x -r 192.168.1.3:80 -m -w 1\n",
		"-a -t 10.0.0.1:80 -r 192.168.1.3:80 -m -w 2\n",   // another weight
		"-a -t 10.0.0.1:80 -r 192.168.1.3 -m -w 1\n",      // no port: the service's, as ParseFast decides
		"-a -t 10.0.0.1:80 -r 192.168.1.3:80x -m -w 1\n",  // not an address
		"-a -t 10.0.0.1:80 -r 192.168.1.3:80 -m -w 1 \n",  // a blank more
		"-a -t 10.0.0.1:80 -r [2001:db8::1]:80 -m -w 1\n", // another family, masquerading: refused by ParseFast too
		"-a -t 10.0.0.1:80 -r  -m -w 1\n",
		"-a -t 10.0.0.1:80 -r 192.168.1.300:80 -m -w 1\n",
	} {
		if n, _, _, ok := tmpl.Match([]byte(s)); ok {
			t.Errorf("%q: matched (%d bytes)", s, n)
		}
	}
	// Another service's line is taken, and the template follows it: the
	// next line of that service names it in the same bytes.
	for i, want := range []struct {
		line       string
		svc        string
		newService bool
	}{
		{"-a -t 10.0.0.2:8080 -r 192.168.1.3:80 -m -w 1\n", "10.0.0.2:8080", true},
		{"-a -t 10.0.0.2:8080 -r 192.168.1.4:80 -m -w 1\n", "10.0.0.2:8080", false},
		{"-a -t 10.0.0.1:80 -r 192.168.1.5:80 -m -w 1\n", "10.0.0.1:80", true},
	} {
		n, got, newService, ok := tmpl.Match([]byte(want.line))
		if !ok {
			t.Errorf("line %d %q: not matched", i, want.line)
			continue
		}
		if n != len(want.line)-1 || newService != want.newService ||
			netip.AddrPortFrom(got.Service.Addr, got.Service.Port).String() != want.svc {
			t.Errorf("line %d %q: took %d bytes, service %v:%d (new: %v)", i, want.line, n, got.Service.Addr, got.Service.Port, newService)
		}
	}
	// An fwmark service's template takes marks as ParseFast reads them.
	mtmpl, _, _ := templateOf(t, []byte("-a -f 1 -r 192.168.1.2:80 -m -w 1"))
	for _, s := range []string{
		"-a -f 0 -r 192.168.1.3:80 -m -w 1\n",          // mark zero: ParseFast refuses it
		"-a -f 4294967296 -r 192.168.1.3:80 -m -w 1\n", // out of range
		"-a -f 12x -r 192.168.1.3:80 -m -w 1\n",
		"-a -f 0x10 -r 192.168.1.3:80 -m -w 1\n",
		"-a -f  -r 192.168.1.3:80 -m -w 1\n",
		"-a -t 10.0.0.1:80 -r 192.168.1.3:80 -m -w 1\n", // another kind of service
	} {
		if n, _, _, ok := mtmpl.Match([]byte(s)); ok {
			t.Errorf("%q: matched (%d bytes)", s, n)
		}
	}
	if _, got, newService, ok := mtmpl.Match([]byte("-a -f 4294967295 -r 192.168.1.3:80 -m -w 1\n")); !ok || !newService || got.Service.FWMark != 4294967295 {
		t.Errorf("the largest mark: matched %v, new service %v", ok, newService)
	}
	if _, got, newService, ok := mtmpl.Match([]byte("-a -f 4294967295 -r 192.168.1.4:80 -m -w 1\n")); !ok || newService || got.Service.FWMark != 4294967295 {
		t.Errorf("the same mark again: matched %v, new service %v", ok, newService)
	}
	// A word that is not part of the line makes no template.
	copied := append([][]byte{}, fields...)
	copied[4] = []byte("192.168.1.2:80")
	tmpl.Set(line, copied, inv)
	if tmpl.ok {
		t.Error("a template from a word outside the line")
	}
	if n, _, _, ok := (&LineTemplate{}).Match([]byte(string(line) + "\n")); ok {
		t.Errorf("an empty template matched (%d bytes)", n)
	}
}

// templateOf is the template of a line ParseFast reads, with the line's
// words and invocation.
func templateOf(t *testing.T, line []byte) (*LineTemplate, [][]byte, *Invocation) {
	t.Helper()
	fields, _ := splitTestFields(line)
	inv := new(Invocation)
	if !ParseFast(fields, inv) {
		t.Fatalf("ParseFast declined %q", line)
	}
	tmpl := new(LineTemplate)
	tmpl.Set(line, fields, inv)
	return tmpl, fields, inv
}

// splitTestFields cuts a line at blanks as lvsctl's reader does.
func splitTestFields(line []byte) ([][]byte, bool) {
	var fields [][]byte
	for _, f := range bytes.FieldsFunc(line, func(r rune) bool { return strings.ContainsRune(" \t\r\v\f", r) }) {
		if string(f) != "ipvsadm" {
			fields = append(fields, f)
		}
	}
	return fields, true
}

// TestHexIPv6MatchesInetPton6: on literals of hexadecimal digits and
// colons, hexIPv6 accepts exactly what inetPton6 accepts, with the same
// address: the named edge cases, then 200,000 random literals built from
// groups of zero to five digits, single and double colons.
func TestHexIPv6MatchesInetPton6(t *testing.T) {
	check := func(s string) (accepted bool) {
		t.Helper()
		got, gotOK := hexIPv6([]byte(s))
		want, wantOK := inetPton6(s)
		if gotOK != wantOK || got != want {
			t.Fatalf("%q: hexIPv6 %v %v, inetPton6 %v %v", s, got, gotOK, want, wantOK)
		}
		return gotOK
	}
	for _, s := range []string{
		"", ":", "::", ":::", "::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7", "1:2:3:4:5:6:7:8:9",
		"1:2:3:4:5:6:7::8", "::1:2:3:4:5:6:7", "1:2:3:4:5:6:7::", "1::2::3", ":1::", "1:", ":1",
		"1::2:", "2001:db8::1", "2001:DB8:0:0:0:0:0:A", "0001:0db8::1", "00001::1", "ffff::FFFF",
		"1:2:3:4:5:6:7:8:", "::ffff", "1:::2", "abcd:ef01:2345:6789:ABCD:EF01:2345:6789",
	} {
		check(s)
	}
	r := rand.New(rand.NewPCG(13, 6))
	const digits = "0123456789abcdefABCDEF"
	accepted := 0
	for range 200_000 {
		var b strings.Builder
		for g := range r.IntN(10) {
			if g > 0 || r.IntN(4) == 0 {
				b.WriteByte(':')
				if r.IntN(6) == 0 {
					b.WriteByte(':')
				}
			}
			for range r.IntN(6) {
				b.WriteByte(digits[r.IntN(len(digits))])
			}
		}
		if r.IntN(8) == 0 {
			b.WriteByte(':')
		}
		if check(b.String()) {
			accepted++
		}
	}
	if accepted < 10_000 {
		t.Errorf("only %d random literals accepted: the test says little", accepted)
	}
}
