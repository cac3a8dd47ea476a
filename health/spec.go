package health

import (
	"crypto/md5"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Spec is one check's settings as a desired-state document (JSON, or YAML
// read through JSON) writes them. A zero field means its default, which
// WithDefaults fills in; durations are Go duration strings ("2s").
type Spec struct {
	// Type is tcp, http, https, dns, udp, smtp, ping or exec.
	Type string `json:"type"`
	// Port, when not 0, replaces the real server's port (not for exec or
	// ping, nor with via vip).
	Port int `json:"port,omitempty"`
	// Interval between probes (default 2s, at least 100ms).
	Interval string `json:"interval,omitempty"`
	// Timeout of one probe: shorter than Interval (default 1s, or half the
	// interval when that is shorter).
	Timeout string `json:"timeout,omitempty"`
	// Rise is the count of consecutive passes that brings a down server
	// back (default 2).
	Rise int `json:"rise,omitempty"`
	// Fall is the count of consecutive failures that takes a server out
	// (default 3).
	Fall int `json:"fall,omitempty"`
	// Via is "direct" (default: probe the real server) or "vip" (probe the
	// service's address with a firewall mark that the caller routes to the
	// one real server checked; see Target.Mark). Not for exec; a ping
	// check is direct only, as IPVS does not forward ICMP echo.
	Via string `json:"via,omitempty"`

	// Path of the HTTP request (http, https; default "/").
	Path string `json:"path,omitempty"`
	// Host header (http, https; default: the address probed).
	Host string `json:"host,omitempty"`
	// Expect lists the passing HTTP statuses: "200", "200-399" (default),
	// "200,204,300-399".
	Expect string `json:"expect,omitempty"`
	// TLSSkipVerify accepts any certificate (https).
	TLSSkipVerify bool `json:"tls_skip_verify,omitempty"`
	// CA is a PEM file of the certificates that sign the server's (https;
	// default: the system's roots).
	CA string `json:"ca,omitempty"`
	// SNI is the TLS server name sent and verified (https; default: the
	// Host header's name, else the address).
	SNI string `json:"sni,omitempty"`
	// URLs, instead of Path and Expect, lists the requests of an http or
	// https check: each probe makes them in turn, and passes when every
	// one does.
	URLs []URL `json:"urls,omitempty"`

	// Query is the name a dns check asks for.
	Query string `json:"query,omitempty"`
	// Record is the type asked for (dns; default A). A dns check passes on
	// rcode NOERROR with at least one answer of this type.
	Record string `json:"record,omitempty"`

	// Send is the datagram a udp check sends ("hex:..." for bytes).
	Send string `json:"send,omitempty"`
	// ExpectBytes must occur in the reply of a udp check ("hex:..." for
	// bytes); empty accepts any reply.
	ExpectBytes string `json:"expect_bytes,omitempty"`

	// Helo is the name an smtp check sends in its HELO (default
	// DefaultHelo). An smtp check passes on a 220 greeting and a 250
	// reply to HELO, then says QUIT and waits for the reply.
	Helo string `json:"helo,omitempty"`

	// Command is the program and its arguments (exec), run without a
	// shell; it passes on exit status 0 within the timeout.
	Command []string `json:"command,omitempty"`
	// User runs Command when the checker runs as root (exec; default
	// nobody).
	User string `json:"user,omitempty"`
	// Dynamic sets the real server's weight from Command's exit status
	// (exec): 0 passes at the weight the file gives, 1 fails, 2 to 255
	// pass at weight status-2 (see WeightResult).
	Dynamic bool `json:"dynamic,omitempty"`
}

// URL is one request of an http or https check.
type URL struct {
	// Path of the request; it must start with "/".
	Path string `json:"path"`
	// Expect lists the passing statuses, as Spec.Expect (default
	// "200-399").
	Expect string `json:"expect,omitempty"`
	// Digest lists MD5 digests of the body, in hex: when given, the body
	// must have one of them. The probe reads at most 1 MiB (maxDigestBody)
	// of it; a longer body fails.
	Digest []string `json:"digest,omitempty"`
}

// maxHelo is the longest HELO name: a domain has at most 255 octets (RFC
// 5321 4.5.3.1.2).
const maxHelo = 255

// maxDigestBody bounds the body an http check with a digest reads: a
// probe holds no more than this of one response.
const maxDigestBody = 1 << 20

// Defaults of Spec.
const (
	DefaultInterval = 2 * time.Second
	DefaultTimeout  = time.Second
	DefaultRise     = 2
	DefaultFall     = 3
	DefaultPath     = "/"
	DefaultExpect   = "200-399"
	DefaultRecord   = "A"
	DefaultUser     = "nobody"
	// DefaultHelo is keepalived 2.2.7's (check_smtp.h SMTP_DEFAULT_HELO),
	// so that a converted SMTP_CHECK greets as it did.
	DefaultHelo = "smtpchecker.keepalived.org"
	// MinInterval is the shortest interval Validate accepts.
	MinInterval = 100 * time.Millisecond
)

const typeList = "tcp, http, https, dns, udp, smtp, ping or exec"

// WithDefaults returns s with its unset fields filled in, for its type
// only: a tcp check gains no path.
func (s Spec) WithDefaults() Spec {
	if s.Interval == "" {
		s.Interval = DefaultInterval.String()
	}
	if s.Timeout == "" {
		t := DefaultTimeout
		if iv, err := time.ParseDuration(s.Interval); err == nil && iv > 0 && iv/2 < t {
			t = iv / 2
		}
		s.Timeout = t.String()
	}
	if s.Rise == 0 {
		s.Rise = DefaultRise
	}
	if s.Fall == 0 {
		s.Fall = DefaultFall
	}
	if s.Via == "" && s.Type != "exec" {
		s.Via = "direct"
	}
	switch s.Type {
	case "http", "https":
		if len(s.URLs) > 0 {
			// A copy: the caller's spec keeps its URLs as given.
			s.URLs = slices.Clone(s.URLs)
			for i := range s.URLs {
				if s.URLs[i].Expect == "" {
					s.URLs[i].Expect = DefaultExpect
				}
			}
			break
		}
		if s.Path == "" {
			s.Path = DefaultPath
		}
		if s.Expect == "" {
			s.Expect = DefaultExpect
		}
	case "dns":
		if s.Record == "" {
			s.Record = DefaultRecord
		}
	case "exec":
		if s.User == "" {
			s.User = DefaultUser
		}
	case "smtp":
		if s.Helo == "" {
			s.Helo = DefaultHelo
		}
	}
	return s
}

// Key identifies what s checks and how its results count: specs with the
// same key share probes. Spellings of the same setting ("2s", "2000ms";
// an omitted default) have the same key.
func (s Spec) Key() string {
	s = s.WithDefaults()
	for _, d := range []*string{&s.Interval, &s.Timeout} {
		if v, err := time.ParseDuration(*d); err == nil {
			*d = v.String()
		}
	}
	s.Record = strings.ToUpper(s.Record)
	s.URLs = slices.Clone(s.URLs) // the caller's stay as given
	for i := range s.URLs {
		if len(s.URLs[i].Digest) > 0 {
			d := slices.Clone(s.URLs[i].Digest)
			for j := range d {
				d[j] = strings.ToLower(d[j])
			}
			s.URLs[i].Digest = d
		}
	}
	b, _ := json.Marshal(s) // strings, ints, bools and slices of them: cannot fail
	return string(b)
}

// Validate checks s with its defaults, including the host: an exec
// program and the directories above it must be safe to run as root, the
// user must exist and a CA file must hold certificates. Errors name the
// field as the document does.
func (s Spec) Validate() error {
	return s.ValidateWith(System{})
}

// ValidateWith is Validate asking sys about the host.
func (s Spec) ValidateWith(sys System) error {
	c, err := compile(s)
	if err != nil {
		return err
	}
	d := c.spec
	switch d.Type {
	case "https":
		if d.CA != "" {
			if _, err := readCA(d.CA); err != nil {
				return fmt.Errorf("ca: %w", err)
			}
		}
	case "exec":
		if err := sys.checkProgram(d.Command[0]); err != nil {
			return fmt.Errorf("command: %w", err)
		}
		if _, _, err := sys.lookupUser(d.User); err != nil {
			return fmt.Errorf("user %q: %w", d.User, err)
		}
	}
	return nil
}

// config is a Spec with its defaults, parsed for probing.
type config struct {
	spec              Spec // with defaults
	given             Spec // as the target gave it
	interval, timeout time.Duration
	urls              []urlConfig // the requests of http and https
	record            dnsmessage.Type
	query             dnsmessage.Name
	send, want        []byte
}

// fields lists the fields that belong to some types only, with those types.
var fields = []struct {
	name  string
	set   func(Spec) bool
	types []string
}{
	{"path", func(s Spec) bool { return s.Path != "" }, []string{"http", "https"}},
	{"host", func(s Spec) bool { return s.Host != "" }, []string{"http", "https"}},
	{"expect", func(s Spec) bool { return s.Expect != "" }, []string{"http", "https"}},
	{"tls_skip_verify", func(s Spec) bool { return s.TLSSkipVerify }, []string{"https"}},
	{"ca", func(s Spec) bool { return s.CA != "" }, []string{"https"}},
	{"sni", func(s Spec) bool { return s.SNI != "" }, []string{"https"}},
	{"query", func(s Spec) bool { return s.Query != "" }, []string{"dns"}},
	{"record", func(s Spec) bool { return s.Record != "" }, []string{"dns"}},
	{"send", func(s Spec) bool { return s.Send != "" }, []string{"udp"}},
	{"expect_bytes", func(s Spec) bool { return s.ExpectBytes != "" }, []string{"udp"}},
	{"command", func(s Spec) bool { return len(s.Command) > 0 }, []string{"exec"}},
	{"user", func(s Spec) bool { return s.User != "" }, []string{"exec"}},
	{"urls", func(s Spec) bool { return len(s.URLs) > 0 }, []string{"http", "https"}},
	{"dynamic", func(s Spec) bool { return s.Dynamic }, []string{"exec"}},
	{"helo", func(s Spec) bool { return s.Helo != "" }, []string{"smtp"}},
	{"port", func(s Spec) bool { return s.Port != 0 }, []string{"tcp", "http", "https", "dns", "udp", "smtp"}},
	{"via", func(s Spec) bool { return s.Via != "" }, []string{"tcp", "http", "https", "dns", "udp", "smtp", "ping"}},
}

// compile checks s without asking the host and parses it.
func compile(s Spec) (*config, error) {
	switch s.Type {
	case "tcp", "http", "https", "dns", "udp", "smtp", "ping", "exec":
	case "":
		return nil, fmt.Errorf("type: missing (%s)", typeList)
	default:
		return nil, fmt.Errorf("type %q: %s", s.Type, typeList)
	}
	for _, f := range fields {
		if f.set(s) && !slices.Contains(f.types, s.Type) {
			return nil, fmt.Errorf("%s: not for %s checks (only %s)", f.name, s.Type, strings.Join(f.types, ", "))
		}
	}
	if len(s.URLs) > 0 && (s.Path != "" || s.Expect != "") {
		return nil, errors.New("urls: not with path or expect (each url has its own)")
	}
	d := s.WithDefaults()
	c := &config{spec: d, given: s}
	var err error
	if c.interval, err = parseDuration("interval", d.Interval); err != nil {
		return nil, err
	}
	if c.timeout, err = parseDuration("timeout", d.Timeout); err != nil {
		return nil, err
	}
	if c.interval < MinInterval {
		return nil, fmt.Errorf("interval %s must be at least %s", c.interval, MinInterval)
	}
	if c.timeout >= c.interval {
		return nil, fmt.Errorf("timeout %s must be shorter than interval %s", c.timeout, c.interval)
	}
	if d.Rise < 1 {
		return nil, errors.New("rise must be at least 1")
	}
	if d.Fall < 1 {
		return nil, errors.New("fall must be at least 1")
	}
	if d.Port < 0 || d.Port > 65535 {
		return nil, fmt.Errorf("port %d: 0 to 65535", d.Port)
	}
	switch d.Via {
	case "", "direct":
	case "vip":
		if d.Port != 0 {
			return nil, errors.New("port: not with via vip (the probe goes to the service's port)")
		}
	default:
		return nil, fmt.Errorf("via %q: direct or vip", d.Via)
	}
	switch d.Type {
	case "http", "https":
		if len(d.URLs) == 0 {
			u, err := compileURL("", URL{Path: d.Path, Expect: d.Expect})
			if err != nil {
				return nil, err
			}
			c.urls = []urlConfig{u}
		}
		for i, du := range d.URLs {
			u, err := compileURL(fmt.Sprintf("urls[%d].", i), du)
			if err != nil {
				return nil, err
			}
			c.urls = append(c.urls, u)
		}
		if strings.ContainsAny(d.Host, " \t\r\n/") {
			return nil, fmt.Errorf("host %q: not a host name", d.Host)
		}
		if d.CA != "" && d.TLSSkipVerify {
			return nil, errors.New("ca: not with tls_skip_verify")
		}
	case "dns":
		if d.Query == "" {
			return nil, errors.New("query: missing (the name a dns check asks for)")
		}
		q := d.Query
		if !strings.HasSuffix(q, ".") {
			q += "."
		}
		if c.query, err = dnsmessage.NewName(q); err != nil {
			return nil, fmt.Errorf("query %q: %v", d.Query, err)
		}
		t, ok := recordTypes[strings.ToUpper(d.Record)]
		if !ok {
			return nil, fmt.Errorf("record %q: %s", d.Record, recordList())
		}
		c.record = t
	case "udp":
		if c.send, err = parseBytes("send", d.Send); err != nil {
			return nil, err
		}
		if c.want, err = parseBytes("expect_bytes", d.ExpectBytes); err != nil {
			return nil, err
		}
	case "exec":
		if len(d.Command) == 0 || d.Command[0] == "" {
			return nil, errors.New("command: missing (the program and its arguments)")
		}
		if !filepath.IsAbs(d.Command[0]) {
			return nil, fmt.Errorf("command: %q is not an absolute path", d.Command[0])
		}
		if strings.ContainsRune(strings.Join(d.Command, ""), 0) {
			return nil, errors.New("command: holds a NUL byte")
		}
	case "smtp":
		// The name goes on the HELO line as it is: a line break would
		// start another command.
		if strings.ContainsFunc(d.Helo, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return nil, fmt.Errorf("helo %q: holds a control character", d.Helo)
		}
		if len(d.Helo) > maxHelo {
			return nil, fmt.Errorf("helo: %d bytes, at most %d", len(d.Helo), maxHelo)
		}
	case "ping":
		if d.Via == "vip" {
			return nil, errors.New("via vip: not for ping checks (IPVS forwards no ICMP echo: the director answers for its VIP itself)")
		}
	}
	return c, nil
}

// urlConfig is a URL parsed for probing.
type urlConfig struct {
	path    string
	expect  statusSet
	text    string           // expect as written, for messages
	digests [][md5.Size]byte // none: the body is not checked
}

// compileURL checks u (with its defaults); prefix is how errors name its
// fields ("urls[1].", or "" for the spec's own path and expect).
func compileURL(prefix string, u URL) (urlConfig, error) {
	if u.Path == "" {
		return urlConfig{}, fmt.Errorf("%spath: missing (the request's path)", prefix)
	}
	if !strings.HasPrefix(u.Path, "/") {
		return urlConfig{}, fmt.Errorf("%spath %q: must start with /", prefix, u.Path)
	}
	if _, err := url.ParseRequestURI(u.Path); err != nil {
		return urlConfig{}, fmt.Errorf("%spath %q: not a request path", prefix, u.Path)
	}
	set, err := parseStatusSet(u.Expect)
	if err != nil {
		return urlConfig{}, fmt.Errorf("%s%w", prefix, err)
	}
	uc := urlConfig{path: u.Path, expect: set, text: u.Expect}
	for j, h := range u.Digest {
		var sum [md5.Size]byte
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != len(sum) {
			return urlConfig{}, fmt.Errorf("%sdigest[%d] %q: not an MD5 digest (32 hex digits)", prefix, j, h)
		}
		copy(sum[:], b)
		uc.digests = append(uc.digests, sum)
	}
	return uc, nil
}

func parseDuration(field, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %q: not a duration", field, v)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s %s must be positive", field, d)
	}
	return d, nil
}

// parseBytes reads a udp field: literal text, or "hex:" and hex digits.
func parseBytes(field, v string) ([]byte, error) {
	h, ok := strings.CutPrefix(v, "hex:")
	if !ok {
		return []byte(v), nil
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return nil, fmt.Errorf("%s %q: bad hex digits", field, v)
	}
	return b, nil
}

var recordTypes = map[string]dnsmessage.Type{
	"A": dnsmessage.TypeA, "AAAA": dnsmessage.TypeAAAA, "CNAME": dnsmessage.TypeCNAME,
	"MX": dnsmessage.TypeMX, "NS": dnsmessage.TypeNS, "PTR": dnsmessage.TypePTR,
	"SOA": dnsmessage.TypeSOA, "SRV": dnsmessage.TypeSRV, "TXT": dnsmessage.TypeTXT,
}

func recordList() string {
	names := make([]string, 0, len(recordTypes))
	for n := range recordTypes {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// statusSet is a list of inclusive HTTP status ranges.
type statusSet []struct{ lo, hi int }

func parseStatusSet(v string) (statusSet, error) {
	bad := fmt.Errorf("expect %q: a status, a range or a list (\"200\", \"200-399\", \"200,204,300-399\")", v)
	var set statusSet
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		a, b, isRange := strings.Cut(part, "-")
		lo, err := strconv.Atoi(strings.TrimSpace(a))
		if err != nil {
			return nil, bad
		}
		hi := lo
		if isRange {
			if hi, err = strconv.Atoi(strings.TrimSpace(b)); err != nil {
				return nil, bad
			}
		}
		if lo < 100 || hi > 599 || lo > hi {
			return nil, fmt.Errorf("expect %q: statuses run from 100 to 599, low to high", v)
		}
		set = append(set, struct{ lo, hi int }{lo, hi})
	}
	return set, nil
}

func (s statusSet) has(code int) bool {
	for _, r := range s {
		if code >= r.lo && code <= r.hi {
			return true
		}
	}
	return false
}

// System is what ValidateWith asks of the host. Each nil field means the
// real system's answer.
type System struct {
	// Stat reports a file's mode and owner, following symbolic links.
	Stat func(name string) (FileInfo, error)
	// LookupUser returns a user's uid and primary gid.
	LookupUser func(name string) (uid, gid uint32, err error)
	// EUID returns the running user's id.
	EUID func() int
}

// FileInfo is what System.Stat reports of a file.
type FileInfo struct {
	Mode fs.FileMode
	UID  uint32
}

func (sys System) stat(name string) (FileInfo, error) {
	if sys.Stat != nil {
		return sys.Stat(name)
	}
	return statOwner(name)
}

func (sys System) lookupUser(name string) (uint32, uint32, error) {
	if sys.LookupUser != nil {
		return sys.LookupUser(name)
	}
	return lookupUser(name)
}

func (sys System) euid() int {
	if sys.EUID != nil {
		return sys.EUID()
	}
	return os.Geteuid()
}

// checkProgram refuses what keepalived's enable_script_security refuses:
// a program that is not a regular executable file, or where it or a
// directory above it (along the path as written and as resolved) is
// writable by group or others or owned by another user than root and the
// running one.
func (sys System) checkProgram(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%q is not an absolute path", path)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("%q: %v", path, pathErrText(err))
	}
	euid := sys.euid()
	fi, err := sys.stat(real)
	if err != nil {
		return fmt.Errorf("%q: %v", path, pathErrText(err))
	}
	switch {
	case !fi.Mode.IsRegular():
		return fmt.Errorf("%q is not a regular file", path)
	case fi.Mode.Perm()&0o111 == 0:
		return fmt.Errorf("%q is not executable", path)
	}
	if err := unsafeOwner(real, fi, euid); err != nil {
		return fmt.Errorf("%q: %w", path, err)
	}
	seen := map[string]bool{}
	for _, p := range []string{real, filepath.Clean(path)} {
		for d := filepath.Dir(p); !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			fi, err := sys.stat(d)
			if err != nil {
				return fmt.Errorf("%q: %v", path, pathErrText(err))
			}
			if err := unsafeOwner(d, fi, euid); err != nil {
				return fmt.Errorf("%q: directory %w", path, err)
			}
		}
	}
	return nil
}

func unsafeOwner(name string, fi FileInfo, euid int) error {
	switch {
	case fi.UID != 0 && int64(fi.UID) != int64(euid):
		return fmt.Errorf("%s is owned by uid %d, not root or the running user", name, fi.UID)
	case fi.Mode.Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by group or others", name)
	}
	return nil
}

func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// readCA reads a PEM file of certificates into a pool.
func readCA(name string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, pathErrText(err))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", name)
	}
	return pool, nil
}
