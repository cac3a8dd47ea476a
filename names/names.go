// Package names answers ipvsadm's name questions as the C library does.
//
// It answers gethostbyname (IPv4 only), gethostbyaddr (canonical name),
// getservbyname and getservbyport, plus inet_aton-style address parsing.
//
// Go's own resolver differs in ways that show up in ipvsadm's output (it
// returns absolute names with a trailing dot and every alias, and has no
// per-protocol service-name table), so this package reads /etc/hosts,
// /etc/services and /etc/nsswitch.conf itself and only uses Go's pure-Go DNS
// client when nsswitch.conf lists dns for hosts. No cgo is involved.
package names

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Default file locations used by NewResolver.
const (
	defaultHostsPath    = "/etc/hosts"
	defaultServicesPath = "/etc/services"
	defaultNSSwitchPath = "/etc/nsswitch.conf"
)

// dnsTimeout bounds one DNS question so a listing cannot hang forever on a
// dead name server (glibc's default is 5 s per try, 2 tries).
const dnsTimeout = 10 * time.Second

// Resolver answers host and service questions. Files are read on first use
// and never again. A Resolver is safe for concurrent use.
type Resolver struct {
	hostsPath, servicesPath, nsswitchPath string
	// noNSSwitch marks a resolver built without an nsswitch file: hosts come
	// from the hosts file only.
	noNSSwitch bool

	hostsOnce sync.Once
	byName    map[string]netip.Addr // lower-cased name or alias → first IPv4 address
	byAddr    map[netip.Addr]string // address → canonical name of its first line
	sources   []string              // nsswitch "hosts:" sources we implement, in order

	servicesOnce sync.Once
	portByName   map[serviceKey]uint16
	nameByPort   map[portKey]string

	dnsMu      sync.Mutex
	dnsForward map[string]netip.Addr
	dnsMissing map[string]bool
	dnsReverse map[netip.Addr]string
}

type serviceKey struct{ name, proto string }

type portKey struct {
	port  uint16
	proto string
}

// NewResolver returns a resolver for the system files /etc/hosts,
// /etc/services and /etc/nsswitch.conf.
func NewResolver() *Resolver {
	return &Resolver{hostsPath: defaultHostsPath, servicesPath: defaultServicesPath, nsswitchPath: defaultNSSwitchPath}
}

// NewResolverFiles returns a resolver reading the given files. An empty
// hosts or services path means "no such file". An empty nsswitch path means
// "hosts: files" (no DNS), which keeps tests off the network; a path that
// does not exist gives glibc's built-in default, which consults DNS first.
func NewResolverFiles(hosts, services, nsswitch string) *Resolver {
	return &Resolver{hostsPath: hosts, servicesPath: services, nsswitchPath: nsswitch, noNSSwitch: nsswitch == ""}
}

// LookupHost4 is gethostbyname restricted to IPv4: the first IPv4 address of
// name, from the hosts file (names and aliases, case-insensitive) or DNS A
// records, in the order nsswitch.conf gives.
func (r *Resolver) LookupHost4(name string) (netip.Addr, bool) {
	if name == "" || isNumericName(name) {
		// glibc handles all-numeric names itself and never asks a source.
		return netip.Addr{}, false
	}
	r.loadHosts()
	for _, src := range r.sources {
		switch src {
		case "files":
			if a, ok := r.byName[strings.ToLower(name)]; ok {
				return a, true
			}
		case "dns":
			if a, ok := r.dnsLookup4(name); ok {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}

// LookupAddr is gethostbyaddr: the canonical name (first name on the first
// matching hosts line, or the first PTR name without its trailing dot) of a.
func (r *Resolver) LookupAddr(a netip.Addr) (string, bool) {
	if !a.IsValid() {
		return "", false
	}
	a = a.WithZone("")
	r.loadHosts()
	for _, src := range r.sources {
		switch src {
		case "files":
			if n, ok := r.byAddr[a]; ok {
				return n, true
			}
		case "dns":
			if n, ok := r.dnsReverseLookup(a); ok {
				return n, true
			}
		}
	}
	return "", false
}

// ServicePort is getservbyname: the port of the first services line for
// proto ("tcp", "udp", "sctp") whose name or an alias equals name exactly.
func (r *Resolver) ServicePort(name, proto string) (uint16, bool) {
	r.loadServices()
	p, ok := r.portByName[serviceKey{name, proto}]
	return p, ok
}

// ServiceName is getservbyport: the official name of the first services
// line for port and proto.
func (r *Resolver) ServiceName(port uint16, proto string) (string, bool) {
	r.loadServices()
	n, ok := r.nameByPort[portKey{port, proto}]
	return n, ok
}

// isNumericName reports whether name is something glibc's gethostbyname
// treats as an address literal rather than a name: only digits and dots, or
// an IPv6 literal. inet_aton has already rejected it, so it resolves to
// nothing.
func isNumericName(name string) bool {
	if strings.Contains(name, ":") {
		_, err := netip.ParseAddr(name)
		return err == nil
	}
	for i := 0; i < len(name); i++ {
		if !isDigit(name[i]) && name[i] != '.' {
			return false
		}
	}
	return true
}

func (r *Resolver) loadHosts() {
	r.hostsOnce.Do(func() {
		r.byName = map[string]netip.Addr{}
		r.byAddr = map[netip.Addr]string{}
		r.sources = hostSources(r.nsswitchPath, r.noNSSwitch)
		forEachLine(r.hostsPath, func(fields []string) {
			if len(fields) < 2 {
				return
			}
			addr, ok := parseHostsAddr(fields[0])
			if !ok {
				return
			}
			if _, seen := r.byAddr[addr]; !seen {
				r.byAddr[addr] = fields[1]
			}
			if !addr.Is4() {
				return
			}
			for _, n := range fields[1:] {
				key := strings.ToLower(n)
				if _, seen := r.byName[key]; !seen {
					r.byName[key] = addr
				}
			}
		})
	})
}

// parseHostsAddr reads the address column of a hosts line: an exact
// dotted quad for IPv4 (glibc uses inet_aton without trailing text) or an
// IPv6 literal.
func parseHostsAddr(s string) (netip.Addr, bool) {
	if strings.Contains(s, ":") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Addr{}, false
		}
		return a, true
	}
	return ParseInetAton(s)
}

// hostSources returns the sources of the nsswitch "hosts:" line that this
// package implements, in order: files, and dns (systemd's resolve module
// counts as dns: both ask the configured name servers). Criteria in
// brackets and other sources (mdns, myhostname, ...) are ignored.
func hostSources(path string, none bool) []string {
	if none {
		return []string{"files"}
	}
	// glibc's built-in default when nsswitch.conf is missing or has no
	// hosts line.
	sources := []string{"dns", "files"}
	forEachLine(path, func(fields []string) {
		if fields[0] != "hosts:" && !(fields[0] == "hosts" && len(fields) > 1 && fields[1] == ":") {
			return
		}
		sources = sources[:0]
		for _, f := range fields[1:] {
			switch f {
			case "files", "dns":
				sources = append(sources, f)
			case "resolve":
				sources = append(sources, "dns")
			}
		}
	})
	return sources
}

func (r *Resolver) loadServices() {
	r.servicesOnce.Do(func() {
		r.portByName = map[serviceKey]uint16{}
		r.nameByPort = map[portKey]string{}
		forEachLine(r.servicesPath, func(fields []string) {
			if len(fields) < 2 {
				return
			}
			portText, proto, ok := strings.Cut(fields[1], "/")
			if !ok || proto == "" {
				return
			}
			port, err := strconv.ParseUint(portText, 10, 16)
			if err != nil {
				return
			}
			pk := portKey{uint16(port), proto}
			if _, seen := r.nameByPort[pk]; !seen {
				r.nameByPort[pk] = fields[0]
			}
			for i, n := range fields {
				if i == 1 {
					continue
				}
				sk := serviceKey{n, proto}
				if _, seen := r.portByName[sk]; !seen {
					r.portByName[sk] = uint16(port)
				}
			}
		})
	})
}

// forEachLine calls fn with the whitespace-separated fields of every
// non-empty line of the file at path, with '#' comments removed. A missing
// or unreadable file has no lines.
func forEachLine(path string, fn func(fields []string)) {
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if fields := strings.Fields(line); len(fields) > 0 {
			fn(fields)
		}
	}
}

// dnsResolver asks name servers directly; the pure-Go client is used so the
// answers do not depend on cgo or on the process's own nsswitch handling.
var dnsResolver = &net.Resolver{PreferGo: true}

func (r *Resolver) dnsLookup4(name string) (netip.Addr, bool) {
	r.dnsMu.Lock()
	defer r.dnsMu.Unlock()
	if a, ok := r.dnsForward[name]; ok {
		return a, true
	}
	if r.dnsMissing[name] {
		return netip.Addr{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), dnsTimeout)
	defer cancel()
	addrs, err := dnsResolver.LookupNetIP(ctx, "ip4", name)
	if err != nil || len(addrs) == 0 {
		if r.dnsMissing == nil {
			r.dnsMissing = map[string]bool{}
		}
		r.dnsMissing[name] = true
		return netip.Addr{}, false
	}
	a := addrs[0].Unmap()
	if r.dnsForward == nil {
		r.dnsForward = map[string]netip.Addr{}
	}
	r.dnsForward[name] = a
	return a, true
}

func (r *Resolver) dnsReverseLookup(a netip.Addr) (string, bool) {
	r.dnsMu.Lock()
	defer r.dnsMu.Unlock()
	if n, ok := r.dnsReverse[a]; ok {
		return n, n != ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), dnsTimeout)
	defer cancel()
	name := ""
	if names, err := dnsResolver.LookupAddr(ctx, a.String()); err == nil && len(names) > 0 {
		name = strings.TrimSuffix(names[0], ".")
	}
	if r.dnsReverse == nil {
		r.dnsReverse = map[netip.Addr]string{}
	}
	r.dnsReverse[a] = name
	return name, name != ""
}
