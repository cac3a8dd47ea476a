package health

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Probe runs one probe of t within its spec's timeout and returns nil when
// it passes, or why it failed in a short text ("connect 10.0.0.2:80:
// connection refused", "http: status 503, want 200-399", "timeout after
// 1s"). A dynamic exec check that passes with a weight returns a
// *WeightResult. When ctx ends first, Probe returns ctx's
// error.
func Probe(ctx context.Context, t Target) error {
	c, err := compileTarget(t)
	if err != nil {
		return err
	}
	return probeTimed(ctx, t, c, probeWith)
}

// compileTarget compiles t's spec and checks that t fits it.
func compileTarget(t Target) (*config, error) {
	c, err := compile(t.Spec)
	if err != nil {
		return nil, err
	}
	return c, checkTarget(t, c)
}

// checkTarget checks that t fits its compiled spec c.
func checkTarget(t Target, c *config) error {
	if c.spec.Via == "vip" && t.Mark == 0 {
		return errors.New("via vip: the target has no mark to reach its real server by")
	}
	return nil
}

// probeTimed runs probe under c's timeout and words a timeout as one.
func probeTimed(ctx context.Context, t Target, c *config, probe func(context.Context, Target, *config) error) error {
	pctx, cancel := context.WithTimeout(ctx, c.timeout)
	err := probe(pctx, t, c)
	cancel()
	if passed(err) {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if pctx.Err() == context.DeadlineExceeded || errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("timeout after %s", c.timeout)
	}
	return err
}

// probeWith runs the probe of c's type; ctx holds the deadline.
func probeWith(ctx context.Context, t Target, c *config) error {
	// TCP, the most common, in small frames of its own: its goroutine's
	// stack grows less.
	if c.spec.Type == "tcp" {
		return probeTCP(ctx, &t, t.probeAddr())
	}
	return probeOther(ctx, &t, c)
}

// probeOther runs the probe of c's type, other than tcp.
func probeOther(ctx context.Context, tp *Target, c *config) error {
	t := *tp
	addr := t.probeAddr()
	switch c.spec.Type {
	case "exec":
		return probeExec(ctx, t, c)
	case "ping":
		return probePing(ctx, addr.Addr(), t.Mark)
	}
	d, err := dialer(t)
	if err != nil {
		return err
	}
	switch c.spec.Type {
	case "http", "https":
		return probeHTTP(ctx, addr, d, c)
	case "dns":
		return probeDNS(ctx, addr, d, c)
	case "udp":
		return probeUDP(ctx, addr, d, c)
	case "smtp":
		return probeSMTP(ctx, addr, d, c)
	}
	return fmt.Errorf("type %q: %s", c.spec.Type, typeList)
}

// plainDialer dials without a mark.
var plainDialer net.Dialer

// dialer is how t's probe dials: plain, or with t's mark and, for a
// via-vip probe, from the source the kernel would use toward the real
// server it crosses (asked anew each time: routes change).
func dialer(t Target) (*net.Dialer, error) {
	if t.Mark == 0 {
		return &plainDialer, nil
	}
	d := &net.Dialer{Control: markControl(t.Mark)}
	if t.Through.IsValid() {
		src, err := sourceToward(t.Through)
		if err != nil {
			return nil, failure(err, "route to "+t.Through.String())
		}
		d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
		if t.Spec.Type == "dns" || t.Spec.Type == "udp" {
			d.LocalAddr = &net.UDPAddr{IP: src.AsSlice()}
		}
	}
	return d, nil
}

// probeError is a failure's short text over its cause, which stays
// visible to errors.Is (a deadline, say).
type probeError struct {
	msg string
	err error
}

func (e *probeError) Error() string { return e.msg }
func (e *probeError) Unwrap() error { return e.err }

// failure words err as prefix and err's cause ("connect 10.0.0.2:80:
// connection refused").
func failure(err error, prefix string) error {
	return &probeError{prefix + ": " + errText(err), err}
}

// markError is a failure to set SO_MARK, worded as such.
type markError struct {
	mark uint32
	err  error
}

func (e *markError) Error() string { return fmt.Sprintf("set SO_MARK %d: %v", e.mark, e.err) }
func (e *markError) Unwrap() error { return e.err }

// errText is the cause of a network error without Go's layers of
// operation names: "connection refused".
func errText(err error) string {
	var me *markError
	if errors.As(err, &me) {
		return me.Error()
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Err.Error()
	}
	return err.Error()
}

// maxBody bounds what an HTTP probe without a digest reads of a
// response's body.
const maxBody = 64 << 10

// probeHTTP requests c's URLs in turn, each on a connection of its own,
// and stops at the first that fails.
func probeHTTP(ctx context.Context, addr netip.AddrPort, d *net.Dialer, c *config) error {
	s := c.spec
	tr := &http.Transport{
		DialContext:            d.DialContext,
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	defer tr.CloseIdleConnections()
	scheme := "http"
	if s.Type == "https" {
		scheme = "https"
		cfg, err := tlsConfig(addr, c)
		if err != nil {
			return err
		}
		tr.TLSClientConfig = cfg
	}
	for i := range c.urls {
		u := &c.urls[i]
		// A check given urls names the one that failed: "http /healthz:
		// status 503".
		prefix := s.Type
		if len(s.URLs) > 0 {
			prefix = s.Type + " " + u.path
		}
		if err := getURL(ctx, tr, scheme, addr, s.Host, prefix, u); err != nil {
			return err
		}
	}
	return nil
}

// getURL makes u's request and checks its answer; prefix starts the
// failure's text.
func getURL(ctx context.Context, tr *http.Transport, scheme string, addr netip.AddrPort, host, prefix string, u *urlConfig) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr.String()+u.path, nil)
	if err != nil {
		return fmt.Errorf("%s: %v", prefix, err)
	}
	if host != "" {
		req.Host = host
	}
	req.Header.Set("User-Agent", "lvskit-health")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return failure(err, "connect "+addr.String())
		}
		var tlsErr *tls.CertificateVerificationError
		if errors.As(err, &tlsErr) {
			return fmt.Errorf("tls: %v", tlsErr.Err)
		}
		return failure(err, prefix)
	}
	defer resp.Body.Close()
	if !u.expect.has(resp.StatusCode) {
		_, _ = io.CopyN(io.Discard, resp.Body, maxBody)
		return fmt.Errorf("%s: status %d, want %s", prefix, resp.StatusCode, u.text)
	}
	if len(u.digests) == 0 {
		_, _ = io.CopyN(io.Discard, resp.Body, maxBody)
		return nil
	}
	h := md5.New()
	n, err := io.CopyN(h, resp.Body, maxDigestBody+1)
	if err != nil && err != io.EOF {
		return failure(err, prefix+": body")
	}
	if n > maxDigestBody {
		return fmt.Errorf("%s: body over %d bytes: no digest", prefix, maxDigestBody)
	}
	var sum [md5.Size]byte
	h.Sum(sum[:0])
	if !slices.Contains(u.digests, sum) {
		return fmt.Errorf("%s: body digest %x, want %s", prefix, sum, digestList(u.digests))
	}
	return nil
}

// digestList words digests for a message: "a", "a or b", "a, b or c".
func digestList(ds [][md5.Size]byte) string {
	hs := make([]string, len(ds))
	for i, d := range ds {
		hs[i] = hex.EncodeToString(d[:])
	}
	if len(hs) == 1 {
		return hs[0]
	}
	return strings.Join(hs[:len(hs)-1], ", ") + " or " + hs[len(hs)-1]
}

func tlsConfig(addr netip.AddrPort, c *config) (*tls.Config, error) {
	s := c.spec
	cfg := &tls.Config{InsecureSkipVerify: s.TLSSkipVerify}
	switch {
	case s.SNI != "":
		cfg.ServerName = s.SNI
	case s.Host != "":
		host := s.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		cfg.ServerName = strings.Trim(host, "[]")
	default:
		cfg.ServerName = addr.Addr().WithZone("").String()
	}
	if s.CA != "" {
		pool, err := cachedCA(s.CA)
		if err != nil {
			return nil, fmt.Errorf("ca: %w", err)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// caCache holds CA pools by file name, reread when the file changes.
var caCache struct {
	sync.Mutex
	m map[string]caEntry
}

type caEntry struct {
	mod  time.Time
	size int64
	pool *x509.CertPool
}

func cachedCA(name string) (*x509.CertPool, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, pathErrText(err))
	}
	caCache.Lock()
	e, ok := caCache.m[name]
	caCache.Unlock()
	if ok && e.mod.Equal(fi.ModTime()) && e.size == fi.Size() {
		return e.pool, nil
	}
	pool, err := readCA(name)
	if err != nil {
		return nil, err
	}
	caCache.Lock()
	if caCache.m == nil {
		caCache.m = map[string]caEntry{}
	}
	caCache.m[name] = caEntry{fi.ModTime(), fi.Size(), pool}
	caCache.Unlock()
	return pool, nil
}

// bufPool holds datagram buffers of dns and udp probes.
var bufPool = sync.Pool{New: func() any { return new([4096]byte) }}

// udpConn is a connected UDP socket whose reads and writes end with ctx.
type udpConn struct {
	net.Conn
	stop func() bool
}

func (c udpConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

func dialUDP(ctx context.Context, addr netip.AddrPort, d *net.Dialer) (udpConn, error) {
	conn, err := d.DialContext(ctx, "udp", addr.String())
	if err != nil {
		return udpConn{}, failure(err, "connect "+addr.String())
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// A cancellation before the deadline ends the wait too.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	return udpConn{conn, stop}, nil
}

// udpErr words a failed datagram exchange; a refused one is an ICMP port
// unreachable.
func udpErr(kind string, addr netip.AddrPort, err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return &probeError{fmt.Sprintf("%s %s: port unreachable", kind, addr), err}
	}
	return failure(err, kind+" "+addr.String())
}

func probeUDP(ctx context.Context, addr netip.AddrPort, d *net.Dialer, c *config) error {
	conn, err := dialUDP(ctx, addr, d)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write(c.send); err != nil {
		return udpErr("udp", addr, err)
	}
	buf := bufPool.Get().(*[4096]byte)
	defer bufPool.Put(buf)
	n, err := conn.Read(buf[:])
	if err != nil {
		return udpErr("udp", addr, err)
	}
	if !bytes.Contains(buf[:n], c.want) {
		return fmt.Errorf("udp %s: reply without expect_bytes", addr)
	}
	return nil
}

var rcodeNames = map[dnsmessage.RCode]string{
	dnsmessage.RCodeSuccess: "NOERROR", dnsmessage.RCodeFormatError: "FORMERR",
	dnsmessage.RCodeServerFailure: "SERVFAIL", dnsmessage.RCodeNameError: "NXDOMAIN",
	dnsmessage.RCodeNotImplemented: "NOTIMP", dnsmessage.RCodeRefused: "REFUSED",
}

func probeDNS(ctx context.Context, addr netip.AddrPort, d *net.Dialer, c *config) error {
	conn, err := dialUDP(ctx, addr, d)
	if err != nil {
		return err
	}
	defer conn.Close()
	buf := bufPool.Get().(*[4096]byte)
	defer bufPool.Put(buf)
	id := uint16(rand.Uint32())
	b := dnsmessage.NewBuilder(buf[:0], dnsmessage.Header{ID: id, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: c.query, Type: c.record, Class: dnsmessage.ClassINET})
	q, err := b.Finish()
	if err != nil {
		return fmt.Errorf("dns: %v", err)
	}
	if _, err := conn.Write(q); err != nil {
		return udpErr("dns", addr, err)
	}
	for {
		n, err := conn.Read(buf[:])
		if err != nil {
			return udpErr("dns", addr, err)
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil || h.ID != id || !h.Response {
			continue // not the reply to this query
		}
		if h.RCode != dnsmessage.RCodeSuccess {
			name, ok := rcodeNames[h.RCode]
			if !ok {
				name = fmt.Sprint(int(h.RCode))
			}
			return fmt.Errorf("dns: rcode %s", name)
		}
		if err := p.SkipAllQuestions(); err != nil {
			return fmt.Errorf("dns: bad reply: %v", err)
		}
		for {
			ah, err := p.AnswerHeader()
			if err == dnsmessage.ErrSectionDone {
				break
			}
			if err != nil {
				return fmt.Errorf("dns: bad reply: %v", err)
			}
			if ah.Type == c.record {
				return nil
			}
			if err := p.SkipAnswer(); err != nil {
				return fmt.Errorf("dns: bad reply: %v", err)
			}
		}
		return fmt.Errorf("dns: no %s answer", strings.ToUpper(c.spec.Record))
	}
}
