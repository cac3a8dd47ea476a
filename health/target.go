package health

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Target is one probe destination with its check.
type Target struct {
	// Addr is where the probe connects: the real server, or for a via-vip
	// check the service's address and port. Spec.Port, when set, replaces
	// its port. For exec it is the real server (LVS_RS_ADDRESS,
	// LVS_RS_PORT).
	Addr netip.AddrPort `json:"addr"`
	// Mark is set as SO_MARK on the probe's socket (0: none; Linux only,
	// and it needs CAP_NET_ADMIN). For a via-vip check the caller sets up
	// an IPVS firewall-mark service for this mark whose only real server
	// is the one checked, so the probe crosses the director's own table.
	Mark uint32 `json:"mark,omitempty"`
	// Through is, for a via-vip check, the real server the probe crosses.
	// The probe leaves from the director's own address toward it: the
	// virtual address, its default source, is the real server's own too,
	// which would drop the probe as a martian.
	Through netip.Addr `json:"through,omitzero"`
	// Spec is the check.
	Spec Spec `json:"spec"`
	// VIP is the virtual service of an exec check (LVS_VIP, LVS_VPORT;
	// zero for a firewall-mark service). Other checks ignore it.
	VIP netip.AddrPort `json:"vip,omitzero"`
	// Env is extra environment for an exec check, read only.
	Env map[string]string `json:"env,omitempty"`
}

// IsZero reports whether t is the zero Target, as reflect's IsZero does
// (json's omitzero calls it) at a small part of its cost.
func (t *Target) IsZero() bool {
	return t.Addr == netip.AddrPort{} && t.Mark == 0 && t.Through == netip.Addr{} && t.VIP == netip.AddrPort{} &&
		t.Env == nil && t.Spec.equal(&Spec{})
}

// TargetKey identifies a probe: targets with equal keys share one probe
// and one state, whichever services they come from. Addr is the address
// probed (with Spec.Port applied, so Spec is the spec's key without its
// port); Env is the exec environment in a canonical form, empty for other
// checks.
type TargetKey struct {
	Addr netip.AddrPort `json:"addr"`
	Mark uint32         `json:"mark,omitempty"`
	Spec string         `json:"spec"`
	Env  string         `json:"env,omitempty"`
}

// Key returns t's key.
func (t Target) Key() TargetKey {
	return t.keyWith(t.specKey())
}

// Keys works out targets' keys as Target.Key does. The real servers of a
// service share its spec: the spec's part of the key is worked out once
// for consecutive targets with equal specs, and its string shared.
type Keys struct {
	last *Spec
	spec string
}

// Key returns t's key.
func (k *Keys) Key(t Target) TargetKey {
	if k.last == nil || !k.last.equal(&t.Spec) {
		s := t.Spec
		k.last, k.spec = &s, t.specKey()
	}
	return t.keyWith(k.spec)
}

// Spec is the spec of the target Key was last given, one copy shared by
// the run of consecutive targets with equal specs it belongs to; nil
// before the first. No one may change it.
func (k *Keys) Spec() *Spec { return k.last }

// equal reports whether s and o are the same spec, field by field, as
// reflect.DeepEqual does at ten times the cost on a large table's reload.
func (s *Spec) equal(o *Spec) bool {
	return s.Type == o.Type && s.Port == o.Port && s.Interval == o.Interval && s.Timeout == o.Timeout &&
		s.Rise == o.Rise && s.Fall == o.Fall && s.Via == o.Via &&
		s.Path == o.Path && s.Host == o.Host && s.Expect == o.Expect &&
		s.TLSSkipVerify == o.TLSSkipVerify && s.CA == o.CA && s.SNI == o.SNI &&
		s.Query == o.Query && s.Record == o.Record &&
		s.Send == o.Send && s.ExpectBytes == o.ExpectBytes && s.Helo == o.Helo &&
		slices.Equal(s.Command, o.Command) && (s.Command == nil) == (o.Command == nil) && s.User == o.User &&
		s.Dynamic == o.Dynamic && (s.URLs == nil) == (o.URLs == nil) && slices.EqualFunc(s.URLs, o.URLs, URL.equal)
}

func (u URL) equal(o URL) bool {
	return u.Path == o.Path && u.Expect == o.Expect && slices.Equal(u.Digest, o.Digest)
}

// specKey is the Spec part of t's key.
func (t Target) specKey() string {
	s := t.Spec
	s.Port = 0 // in Addr
	return s.Key()
}

// keyWith is Key with the Spec part already known.
func (t Target) keyWith(specKey string) TargetKey {
	k := TargetKey{Addr: t.probeAddr(), Mark: t.Mark, Spec: specKey}
	if t.Spec.Type == "exec" {
		env := t.execEnv()
		slices.Sort(env)
		k.Env = strings.Join(env, "\x00")
	}
	return k
}

// probeAddr is the address t's probe goes to: Spec.Port replaces the
// port; a ping has none, so the services of one real server share its
// ping whatever their ports.
func (t Target) probeAddr() netip.AddrPort {
	if t.Spec.Type == "ping" {
		return netip.AddrPortFrom(t.Addr.Addr(), 0)
	}
	if t.Spec.Port != 0 && t.Spec.Port <= 65535 {
		return netip.AddrPortFrom(t.Addr.Addr(), uint16(t.Spec.Port))
	}
	return t.Addr
}

// execPath is the PATH an exec check runs with.
const execPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// execEnv is the whole environment of an exec check: PATH, the LVS_*
// variables, then Env (which may replace them).
func (t Target) execEnv() []string {
	env := make([]string, 0, 5+len(t.Env))
	env = append(env, execPath,
		"LVS_RS_ADDRESS="+t.Addr.Addr().String(),
		"LVS_RS_PORT="+strconv.Itoa(int(t.Addr.Port())))
	if t.VIP.IsValid() {
		env = append(env, "LVS_VIP="+t.VIP.Addr().String(),
			"LVS_VPORT="+strconv.Itoa(int(t.VIP.Port())))
	}
	for k, v := range t.Env {
		env = append(env, k+"="+v)
	}
	return env
}
