package list_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/list"
	"github.com/lvskit/lvskit/ipvsadm/list/listtest"
	"github.com/lvskit/lvskit/names"
	"github.com/lvskit/lvskit/save"
)

// goldenDir holds the transcripts of the real ipvsadm 1.31.
const goldenDir = "../../testscripts/golden"

// goldenResolver answers name questions like the VM that recorded the
// transcripts: its /etc/hosts and Debian 12's /etc/services, no DNS.
func goldenResolver() *names.Resolver {
	return names.NewResolverFiles(filepath.Join(goldenDir, "hosts"), "../../names/testdata/services", "")
}

// goldenFile is one recorded command with its results.
type goldenFile struct {
	name          string // e.g. "r2/087"
	cmd, out, err string
	rc            string
}

func readGolden(t *testing.T, name string) goldenFile {
	t.Helper()
	read := func(ext string) string {
		b, err := os.ReadFile(filepath.Join(goldenDir, name+ext))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return goldenFile{name: name, cmd: strings.TrimSuffix(read(".cmd"), "\n"), out: read(".out"), err: read(".err"), rc: strings.TrimSpace(read(".rc"))}
}

// pieceKind classifies one shell command of a golden .cmd line.
type pieceKind int

const (
	pieceQuiet       pieceKind = iota // no stdout, no change (sleep, echo rc=$?, traffic)
	pieceMutate                       // changes the table
	pieceList                         // -L / -S we can render
	pieceUnsupported                  // anything else with output
)

// piece is one parsed ipvsadm invocation (or a cat of a file it wrote).
type piece struct {
	kind     pieceKind
	save     bool
	opts     list.Options
	svc      *ipvs.Service // -L <service>
	noStdout bool          // ipvsadm-save usage error: prints nothing on stdout
	sedBar   bool          // | sed "s/\$/|/"
	grep     string        // | grep X
	head     int           // | head -N
	toFile   string        // > file
	catFile  string        // cat file | ...
	text     string
}

// parsePieces splits a .cmd line into its commands.
func parsePieces(cmd string, r *names.Resolver) []piece {
	var out []piece
	for _, text := range splitCommands(cmd) {
		text = strings.TrimSpace(text)
		p := parsePiece(text, r)
		p.text = text
		out = append(out, p)
	}
	return out
}

// splitCommands splits a shell line at the semicolons outside quotes.
func splitCommands(cmd string) []string {
	var out []string
	quote := byte(0)
	start := 0
	for i := 0; i < len(cmd); i++ {
		switch c := cmd[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == ';':
			out = append(out, cmd[start:i])
			start = i + 1
		}
	}
	return append(out, cmd[start:])
}

func parsePiece(text string, r *names.Resolver) piece {
	tokens := strings.Fields(text)
	if len(tokens) == 0 {
		return piece{kind: pieceQuiet}
	}
	var p piece
	// Output filters and redirections at the end.
	for i := 0; i < len(tokens); i++ {
		switch tokens[i] {
		case "|":
			rest := tokens[i+1:]
			switch {
			case len(rest) == 2 && rest[0] == "sed" && rest[1] == `"s/\$/|/"`:
				p.sedBar = true
			case len(rest) == 2 && rest[0] == "grep":
				p.grep = rest[1]
			case len(rest) == 2 && rest[0] == "head" && strings.HasPrefix(rest[1], "-"):
				p.head, _ = strconv.Atoi(rest[1][1:])
			case len(rest) == 2 && rest[0] == "ipvsadm" && rest[1] == "-R":
				return piece{kind: pieceMutate}
			default:
				return piece{kind: pieceUnsupported}
			}
			tokens = tokens[:i]
		case ">":
			if i+2 != len(tokens) {
				return piece{kind: pieceUnsupported}
			}
			p.toFile = tokens[i+1]
			tokens = tokens[:i]
		case "<":
			return piece{kind: pieceMutate} // ipvsadm -R < file
		}
	}
	switch tokens[0] {
	case "sleep", "echo", "true", "for", "do", "done", "bash", "timeout", "printf":
		return piece{kind: pieceQuiet}
	case "cat":
		if len(tokens) == 2 && strings.HasPrefix(tokens[1], "/tmp/") {
			p.kind, p.catFile = pieceList, tokens[1]
			return p
		}
		return piece{kind: pieceUnsupported}
	case "ipvsadm-save":
		p.kind, p.save = pieceList, true
		for _, a := range tokens[1:] {
			if a == "-n" {
				p.opts.Numeric = true
			} else if strings.HasPrefix(a, "-") {
				p.noStdout = true
			}
		}
		return p
	case "ipvsadm":
	default:
		return piece{kind: pieceUnsupported}
	}
	return parseIpvsadm(p, tokens[1:], r)
}

// parseIpvsadm reads the listing options of an ipvsadm command line.
func parseIpvsadm(p piece, args []string, r *names.Resolver) piece {
	var expanded []string
	for _, a := range args {
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.Trim(a[1:], "LlSnX") == "" {
			for _, c := range a[1:] {
				expanded = append(expanded, "-"+string(c))
			}
			continue
		}
		expanded = append(expanded, a)
	}
	command := ""
	var stats, rate, thresholds, persist, tun bool
	var svcOpt, svcArg string
	v6 := false
	for i := 0; i < len(expanded); i++ {
		a := expanded[i]
		switch a {
		case "-L", "-l", "--list":
			command = "list"
		case "-S", "--save":
			command = "save"
		case "-n", "--numeric":
			p.opts.Numeric = true
		case "--exact", "-X":
			p.opts.Exact = true
		case "--nosort":
			p.opts.NoSort = true
		case "--sort":
		case "--stats":
			stats = true
		case "--rate":
			rate = true
		case "--thresholds":
			thresholds = true
		case "--persistent-conn":
			persist = true
		case "--tun-info":
			tun = true
		case "-6", "--ipv6":
			v6 = true
		case "-t", "--tcp-service", "-u", "--udp-service", "--sctp-service", "-f", "--fwmark-service":
			if i+1 >= len(expanded) {
				return piece{kind: pieceUnsupported}
			}
			svcOpt, svcArg = a, expanded[i+1]
			i++
		case "-c", "--connection", "--timeout", "--daemon":
			return piece{kind: pieceUnsupported} // covered by their own tests
		default:
			if command == "" {
				return piece{kind: pieceMutate}
			}
			return piece{kind: pieceUnsupported}
		}
	}
	switch command {
	case "":
		if len(args) == 0 { // bare ipvsadm lists
			p.kind = pieceList
			return p
		}
		return piece{kind: pieceMutate}
	case "save":
		if svcOpt != "" {
			p.noStdout = true // -S with a service is a usage error
		}
		p.kind, p.save = pieceList, true
		return p
	}
	switch {
	case stats:
		p.opts.Format = list.Stats
	case rate:
		p.opts.Format = list.Rate
	case thresholds:
		p.opts.Format = list.Thresholds
	case persist:
		p.opts.Format = list.PersistConn
	case tun:
		p.opts.Format = list.TunInfo
	}
	p.kind = pieceList
	if svcOpt != "" {
		svc, ok := parseServiceArg(svcOpt, svcArg, v6, r)
		if !ok {
			return piece{kind: pieceUnsupported}
		}
		p.svc = &svc
	}
	return p
}

// parseServiceArg is a small version of ipvsadm's service-address parsing,
// enough for the golden commands.
func parseServiceArg(opt, arg string, v6 bool, r *names.Resolver) (ipvs.Service, bool) {
	s := ipvs.Service{Family: ipvs.AFInet}
	switch opt {
	case "-f", "--fwmark-service":
		m, err := strconv.ParseUint(arg, 10, 32)
		if err != nil {
			return s, false
		}
		s.FWMark, s.Protocol = uint32(m), ipvs.ProtoTCP
		if v6 {
			s.Family = ipvs.AFInet6
		}
		return s, true
	case "-t", "--tcp-service":
		s.Protocol = ipvs.ProtoTCP
	case "-u", "--udp-service":
		s.Protocol = ipvs.ProtoUDP
	default:
		s.Protocol = ipvs.ProtoSCTP
	}
	host, port := arg, ""
	if strings.HasPrefix(arg, "[") {
		end := strings.Index(arg, "]:")
		if end < 0 {
			return s, false
		}
		host, port = arg[1:end], arg[end+2:]
	} else if a, err := netip.ParseAddr(arg); err == nil && a.Is6() {
		host = arg
	} else if i := strings.LastIndex(arg, ":"); i >= 0 {
		host, port = arg[:i], arg[i+1:]
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		s.Family, s.Addr = ipvs.AFInet6, a
	} else if a, ok := names.ParseInetAton(host); ok {
		s.Addr = a
	} else if a, ok := r.LookupHost4(host); ok {
		s.Addr = a
	} else {
		return s, false
	}
	if port != "" {
		if n, err := strconv.ParseUint(port, 10, 16); err == nil {
			s.Port = uint16(n)
		} else if n, ok := r.ServicePort(port, map[ipvs.Protocol]string{6: "tcp", 17: "udp", 132: "sctp"}[s.Protocol]); ok {
			s.Port = n
		} else {
			return s, false
		}
	}
	return s, true
}

// checkable reports whether a golden file can be replayed: every command is
// understood and no change follows the first listing.
func checkable(ps []piece) (bool, string) {
	listed := false
	for _, p := range ps {
		switch p.kind {
		case pieceUnsupported:
			return false, "unsupported command " + strconv.Quote(p.text)
		case pieceMutate:
			if listed {
				return false, "table changes between listings"
			}
		case pieceList:
			listed = true
		}
	}
	if !listed {
		return false, "no listing"
	}
	return true, ""
}

// modelSource reports whether the file's output can be read back into a
// table: all its listings are numeric.
func modelSource(ps []piece) bool {
	for _, p := range ps {
		if p.kind == pieceList && p.catFile == "" && !p.opts.Numeric {
			return false
		}
	}
	return true
}

// withoutRC drops the "rc=N" lines "echo rc=$?" adds to the transcripts.
func withoutRC(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l == "" || (strings.HasPrefix(l, "rc=") && strings.Trim(strings.TrimSpace(l[3:]), "0123456789") == "") {
			continue
		}
		b.WriteString(l)
	}
	return b.String()
}

// render replays the listing commands of a golden file against client.
func render(ps []piece, client *listtest.Client, r *names.Resolver) (string, error) {
	var out bytes.Buffer
	files := map[string]string{}
	for _, p := range ps {
		if p.kind != pieceList || p.noStdout {
			continue
		}
		var buf bytes.Buffer
		opts := p.opts
		opts.Resolver = r
		var err error
		switch {
		case p.catFile != "":
			buf.WriteString(files[p.catFile])
		case p.save:
			err = save.Write(&buf, client, opts)
		case p.svc != nil:
			err = list.Service(&buf, client, *p.svc, opts)
		default:
			err = list.Table(&buf, client, client.T.Info, opts)
		}
		if err != nil && !errors.Is(err, unix.ESRCH) {
			return "", fmt.Errorf("%s: %w", p.text, err)
		}
		text := filterOutput(buf.String(), p)
		if p.toFile != "" {
			files[p.toFile] = text
			continue
		}
		out.WriteString(text)
	}
	return out.String(), nil
}

func filterOutput(s string, p piece) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var b strings.Builder
	for i, l := range lines {
		if p.head > 0 && i >= p.head {
			break
		}
		if p.grep != "" && !strings.Contains(l, p.grep) {
			continue
		}
		if p.sedBar {
			l = strings.TrimSuffix(l, "\n") + "|\n"
		}
		b.WriteString(l)
	}
	return b.String()
}

// lastListing returns the last listing in a transcript output: from its
// header (or title when it has none) to the end.
func lastListing(out string) string {
	lines := strings.SplitAfter(out, "\n")
	start := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "IP Virtual Server version") {
			start = i
		} else if strings.HasPrefix(l, "Prot ") && (i == 0 || !strings.HasPrefix(lines[i-1], "IP Virtual Server version")) {
			start = i
		}
	}
	return strings.Join(lines[start:], "")
}

// goldenGroup is a set of transcripts taken while the table did not change,
// so one rebuilt table must reproduce all of them.
type goldenGroup struct {
	dir   string
	ids   []string
	rules string // -S -n text of the table when no numeric output shows all of it
}

var goldenGroups = []goldenGroup{
	{dir: "r2", ids: seq(85, 114)},
	{dir: "r4", ids: seq(10, 15)},
	{dir: "r5", ids: seq(27, 28)},
	// Before any traffic (t7.sh): only non-numeric listings exist, so the
	// table is given as the rules t7.sh created.
	{dir: "r7", ids: []string{"003"}, rules: `-A -t 10.0.0.3:80 -s wlc
-a -t 10.0.0.3:80 -r 192.168.10.2:80 -m -w 1
-A -u 10.0.0.3:80 -s wlc -p 360
-a -u 10.0.0.3:80 -r 192.168.10.2:8080 -m -w 1
-A -u 10.10.0.1:53 -s rr
-a -u 10.10.0.1:53 -r 10.30.0.2:5353 -m -w 1
`},
}

func seq(from, to int) []string {
	var ids []string
	for i := from; i <= to; i++ {
		ids = append(ids, fmt.Sprintf("%03d", i))
	}
	return ids
}

// mustReproduce are transcripts the replay has to cover; the test fails if
// any of them is skipped, so the harness cannot quietly check nothing.
var mustReproduce = []string{
	"r2/085", "r2/086", "r2/087", "r2/088", "r2/089", "r2/090", "r2/091", "r2/092", "r2/093",
	"r2/094", "r2/095", "r2/096", "r2/097", "r2/098", "r2/099", "r2/100", "r2/101", "r2/102",
	"r2/105", "r2/106", "r2/107", "r2/108", "r2/109", "r2/111", "r2/112", "r2/114",
	"r4/010", "r4/011", "r4/012", "r4/013", "r4/014", "r4/015", "r4/017", "r4/018",
	"r5/027", "r5/028", "r7/003", "r7/007", "r7/008", "r7/009",
	"r8/006", "r8/008", "r9/003", "r10/013", "r10/016", "r11/007", "r11/008",
	"r12/001", "r12/003",
}

// TestGoldenListings rebuilds the table behind each golden listing from the
// numeric outputs (and -S -n rules) recorded with it, in the kernel order a
// --nosort listing shows when there is one, and replays every listing and
// save command of the transcript against it, comparing stdout byte for byte.
func TestGoldenListings(t *testing.T) {
	r := goldenResolver()
	grouped := map[string]*goldenGroup{}
	for i := range goldenGroups {
		for _, id := range goldenGroups[i].ids {
			grouped[goldenGroups[i].dir+"/"+id] = &goldenGroups[i]
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(goldenDir, "r*"))
	checked := map[string]bool{}
	skipped := map[string]string{}
	var groupsDone = map[*goldenGroup]bool{}
	for _, dir := range dirs {
		cmds, _ := filepath.Glob(filepath.Join(dir, "*.cmd"))
		for _, c := range cmds {
			name := strings.TrimSuffix(strings.TrimPrefix(c, goldenDir+"/"), ".cmd")
			g := grouped[name]
			if g == nil {
				g = &goldenGroup{dir: filepath.Base(dir), ids: []string{filepath.Base(name)}}
			} else if groupsDone[g] {
				continue
			}
			groupsDone[g] = true
			replayGroup(t, g, r, checked, skipped)
		}
	}
	for _, name := range mustReproduce {
		if !checked[name] {
			t.Errorf("%s was not replayed: %s", name, skipped[name])
		}
	}
	if os.Getenv("LVSKIT_LIST_REPLAYED") != "" {
		var names []string
		for n := range checked {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Logf("replayed: %s", strings.Join(names, " "))
	}
	t.Logf("replayed %d golden transcripts byte for byte; %d others are not listings of this package (CLI errors, restore, -c/--timeout/--daemon, shell commands)", len(checked), len(skipped))
}

func replayGroup(t *testing.T, g *goldenGroup, r *names.Resolver, checked map[string]bool, skipped map[string]string) {
	t.Helper()
	type member struct {
		f  goldenFile
		ps []piece
	}
	var members []member
	for _, id := range g.ids {
		f := readGolden(t, g.dir+"/"+id)
		if f.rc != "0" && f.err != "No such service\n" {
			// Usage and validation errors belong to the ipvsadm CLI.
			skipped[f.name] = "command fails with " + strconv.Quote(f.err)
			continue
		}
		ps := parsePieces(f.cmd, r)
		if ok, why := checkable(ps); !ok {
			skipped[f.name] = why
			continue
		}
		members = append(members, member{f, ps})
	}
	if len(members) == 0 {
		return
	}
	table := listtest.New()
	sources := 0
	if g.rules != "" {
		if err := table.Add(g.rules); err != nil {
			t.Fatalf("%s rules: %v", g.dir, err)
		}
		sources++
	}
	order := ""
	for _, m := range members {
		for _, p := range m.ps {
			if p.kind == pieceList && p.opts.NoSort {
				order = lastListing(m.f.out)
			}
		}
	}
	if order != "" {
		if err := table.Add(order); err != nil {
			t.Fatalf("%s order: %v", g.dir, err)
		}
	}
	for _, m := range members {
		if !modelSource(m.ps) {
			continue
		}
		text := withoutRC(m.f.out)
		for _, p := range m.ps {
			if p.sedBar {
				text = strings.ReplaceAll(text, "|\n", "\n")
			}
		}
		if err := table.Add(text); err != nil {
			t.Errorf("%s: reading the output back: %v", m.f.name, err)
			return
		}
		sources++
	}
	if sources == 0 {
		for _, m := range members {
			skipped[m.f.name] = "no numeric output to rebuild the table from"
		}
		return
	}
	if order != "" {
		if err := table.OrderLike(order); err != nil {
			t.Fatalf("%s order: %v", g.dir, err)
		}
	}
	client := &listtest.Client{T: table}
	for _, m := range members {
		got, err := render(m.ps, client, r)
		if err != nil {
			t.Errorf("%s: %v", m.f.name, err)
			continue
		}
		want := withoutRC(m.f.out)
		if got != want {
			t.Errorf("%s (%s) differs:\n%s", m.f.name, m.f.cmd, diffLines(want, got))
			continue
		}
		checked[m.f.name] = true
	}
}

// diffLines shows the first differing lines of two texts.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d\n  want %q\n  got  %q\n", i+1, wl, gl)
			if shown++; shown == 8 {
				break
			}
		}
	}
	return b.String()
}
