package cmdline

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// specMatrix is the command × option table of the behaviour reference (docs/reference/ipvsadm-1.31.md §2.5),
// read from its markdown so that the test does not share its data with the
// implementation.
type specMatrix struct {
	commands []specCommand
	options  []string          // option names by index
	cells    map[[2]int]string // (command column, option index) → REQ, -, ONE, ok
}

type specCommand struct {
	argv []string // how to select the command
	name string   // its name in messages
}

func loadSpecMatrix(t *testing.T) specMatrix {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "matrix.md"))
	if err != nil {
		t.Fatal(err)
	}
	var m specMatrix
	m.cells = map[[2]int]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") {
			continue
		}
		fields := strings.Split(strings.Trim(line, "|"), "|")
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		if fields[0] == "#" {
			for _, h := range fields[2:] {
				words := strings.Fields(h)
				c := specCommand{argv: []string{words[0]}, name: strings.TrimPrefix(words[0], "--")}
				if len(words) > 1 {
					c.name = words[1]
				}
				switch words[0] {
				case "--set":
					c.argv = []string{"--set", "1", "2", "3"}
				case "--start-daemon", "--stop-daemon":
					c.argv = []string{words[0], "master"}
				}
				m.commands = append(m.commands, c)
			}
			continue
		}
		idx, err := strconv.Atoi(fields[0])
		if err != nil || idx != len(m.options) {
			t.Fatalf("bad matrix row %q", line)
		}
		m.options = append(m.options, fields[1])
		for c, cell := range fields[2:] {
			m.cells[[2]int{c, idx}] = cell
		}
	}
	if len(m.commands) != NumMatrixCommands || len(m.options) != numOptions {
		t.Fatalf("spec matrix is %d×%d, implementation %d×%d", len(m.commands), len(m.options), NumMatrixCommands, numOptions)
	}
	return m
}

// optionWords gives, for every option that has a bit, a valid way to give
// it on a command line.
var optionWords = map[string][]string{
	"numeric": {"-n"}, "connection": {"-c"}, "service-address": {"-u", "10.0.0.1:53"},
	"scheduler": {"-s", "rr"}, "persistent": {"-p", "10"}, "netmask": {"-M", "255.255.255.0"},
	"real-server": {"-r", "192.168.10.1"}, "forwarding-method": {"-m"}, "weight": {"-w", "3"},
	"u-threshold": {"-x", "10"}, "l-threshold": {"-y", "5"}, "mcast-interface": {"--mcast-interface", "eth0"},
	"timeout": {"--timeout"}, "daemon": {"--daemon"}, "stats": {"--stats"}, "rate": {"--rate"},
	"thresholds": {"--thresholds"}, "persistent-conn": {"--persistent-conn"}, "nosort": {"--nosort"},
	"syncid": {"--syncid", "3"}, "exact": {"--exact"}, "ops": {"-o"}, "pe": {"--pe", "sip"},
	"sched-flags": {"-b", "flag-1"}, "mcast-group": {"--mcast-group", "224.0.0.81"},
	"mcast-port": {"--mcast-port", "8848"}, "mcast-ttl": {"--mcast-ttl", "1"},
	"sync-maxlen": {"--sync-maxlen", "1400"}, "tun-info": {"--tun-info"}, "tun-type": {"--tun-type", "ipip"},
	"tun-port": {"--tun-port", "6080"}, "tun-nocsum": {"--tun-nocsum"}, "tun-csum": {"--tun-csum"},
	"tun-remcsum": {"--tun-remcsum"},
}

// matrixMessage reports whether msg is one of the matrix check's messages.
func matrixMessage(msg string) bool {
	return strings.Contains(msg, "' command\n")
}

func parseOutcome(t *testing.T, argv ...string) string {
	t.Helper()
	p := &Parser{Resolver: testResolver(t)}
	inv, o := p.Parse(append([]string{"ipvsadm"}, argv...))
	if o == nil {
		if inv == nil {
			t.Fatalf("%v: Parse returned neither invocation nor outcome", argv)
		}
		return ""
	}
	return o.Stderr
}

func TestMatrixNamesMatchSpec(t *testing.T) {
	m := loadSpecMatrix(t)
	for i, name := range m.options {
		if Option(i).Name() != name {
			t.Errorf("option %d is %q in the spec, %q here", i, name, Option(i).Name())
		}
	}
	for c, sc := range m.commands {
		if Command(c).Name() != sc.name {
			t.Errorf("command %d is %q in the spec, %q here", c, sc.name, Command(c).Name())
		}
	}
}

// TestMatrixCells checks every command × option cell by running the parser
// on a command line built for it, and compares with what the spec's rules
// say the message must be.
func TestMatrixCells(t *testing.T) {
	m := loadSpecMatrix(t)
	for c, cmd := range m.commands {
		var required [][]string
		var requiredIdx []int
		for o := range m.options {
			if m.cells[[2]int{c, o}] == "REQ" {
				required = append(required, optionWords[m.options[o]])
				requiredIdx = append(requiredIdx, o)
			}
		}
		withRequired := func(skip int) []string {
			argv := append([]string(nil), cmd.argv...)
			for i, words := range required {
				if requiredIdx[i] != skip {
					argv = append(argv, words...)
				}
			}
			return argv
		}
		// With every compulsory option the matrix is satisfied.
		if msg := parseOutcome(t, withRequired(-1)...); matrixMessage(msg) {
			t.Errorf("%v: %q", withRequired(-1), msg)
		}
		var oneOf []int
		for o, name := range m.options {
			cell := m.cells[[2]int{c, o}]
			switch cell {
			case "REQ":
				argv := withRequired(o)
				want := "You need to supply the '" + name + "' option for the '" + cmd.name + "' command\n"
				if got := parseOutcome(t, argv...); got != want {
					t.Errorf("%v: got %q, want %q", argv, got, want)
				}
			case "-":
				argv := append(withRequired(-1), optionWords[name]...)
				want := "Illegal '" + name + "' option with the '" + cmd.name + "' command\n"
				if got := parseOutcome(t, argv...); got != want {
					t.Errorf("%v: got %q, want %q", argv, got, want)
				}
			case "ok", "ONE":
				argv := append(withRequired(-1), optionWords[name]...)
				if got := parseOutcome(t, argv...); matrixMessage(got) {
					t.Errorf("%v: allowed by the spec, got %q", argv, got)
				}
				if cell == "ONE" {
					oneOf = append(oneOf, o)
				}
			default:
				t.Fatalf("cell %q for %s × %s", cell, cmd.name, name)
			}
		}
		// Two exclusive options conflict whatever their command-line
		// order; the message names them by table order.
		for i, a := range oneOf {
			for _, b := range oneOf[i+1:] {
				want := "The option '" + m.options[b] + "' conflicts with the '" + m.options[a] + "' option in the '" + cmd.name + "' command\n"
				for _, pair := range [][2]int{{a, b}, {b, a}} {
					argv := withRequired(-1)
					argv = append(argv, optionWords[m.options[pair[0]]]...)
					argv = append(argv, optionWords[m.options[pair[1]]]...)
					if got := parseOutcome(t, argv...); got != want {
						t.Errorf("%v: got %q, want %q", argv, got, want)
					}
				}
			}
		}
	}
}

// TestMatrixEverySpelling repeats the illegal/allowed check for every
// spelling of every option in the option table (short and long names,
// options sharing a bit), against the implementation's own Allowed.
func TestMatrixEverySpelling(t *testing.T) {
	m := loadSpecMatrix(t)
	values := map[string]string{
		"tcp-service": "10.0.0.1:80", "udp-service": "10.0.0.1:53", "sctp-service": "10.0.0.1:5060",
		"fwmark-service": "7",
	}
	for c, cmd := range m.commands {
		for _, spec := range OptionTable {
			if spec.Option == NoOption {
				continue
			}
			name := spec.Option.Name()
			words := optionWords[name]
			var spellings [][]string
			value := words[1:]
			if v, ok := values[spec.Long]; ok {
				value = []string{v}
			}
			if spec.Arg == ArgNone {
				value = nil
			}
			spellings = append(spellings, append([]string{"--" + spec.Long}, value...))
			for _, s := range spec.Short {
				spellings = append(spellings, append([]string{"-" + string(s)}, value...))
			}
			for _, sp := range spellings {
				argv := append(append([]string(nil), cmd.argv...), sp...)
				got := parseOutcome(t, argv...)
				illegal := "Illegal '" + name + "' option with the '" + cmd.name + "' command\n"
				switch m.cells[[2]int{c, int(spec.Option)}] {
				case "-":
					// An earlier-indexed compulsory option may be reported
					// first; the illegal one must be reported otherwise.
					if got != illegal && !strings.HasPrefix(got, "You need to supply") {
						t.Errorf("%v: got %q, want %q", argv, got, illegal)
					}
				default:
					if got == illegal {
						t.Errorf("%v: allowed by the spec, got %q", argv, got)
					}
				}
			}
		}
	}
}

func TestMatrixFirstProblemWins(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		// numeric (column 0) comes before the missing service (column 2).
		{[]string{"-a", "-n"}, "Illegal 'numeric' option with the 'add-server' command\n"},
		{[]string{"-a", "-r", "1.1.1.1", "-s", "rr"}, "You need to supply the 'service-address' option for the 'add-server' command\n"},
		{[]string{"-L", "--daemon", "-t", "10.0.0.1:80", "-c"}, "The option 'service-address' conflicts with the 'connection' option in the 'list' command\n"},
	} {
		if got := parseOutcome(t, tc.argv...); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.argv, got, tc.want)
		}
	}
}
