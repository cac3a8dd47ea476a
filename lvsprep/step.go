package lvsprep

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/lvskit/lvskit/netfilter"
)

// kind names what a step changes; it is also the step's tag in state files.
type kind string

const (
	kindModule kind = "module"
	kindSysctl kind = "sysctl"
	kindLinkUp kind = "link-up"
	kindAddr   kind = "address"
	kindRoute  kind = "default-route"
	kindRule   kind = "iptables-rule"
)

// step is one host setting a profile wants. It is plain data so that a
// state file can hold it and --undo can revert it without the profile's
// flags.
type step struct {
	Kind kind   `json:"kind"`
	Why  string `json:"why"`

	Module string `json:"module,omitempty"`

	Sysctl string   `json:"sysctl,omitempty"` // path below /proc/sys
	Value  string   `json:"value,omitempty"`
	Accept []string `json:"accept,omitempty"` // other values that serve as well

	Dev  string       `json:"dev,omitempty"`
	Addr netip.Prefix `json:"addr,omitzero"`

	Route *netfilter.Route `json:"route,omitempty"`

	Family netfilter.Family `json:"family,omitempty"`
	Table  string           `json:"table,omitempty"`
	Chain  string           `json:"chain,omitempty"`
	Rule   []string         `json:"rule,omitempty"`
}

// record is a step as applied: whether lvsprep changed anything and what was
// there before, which is what --undo restores.
type record struct {
	step
	// Changed is false when the setting was already in place: undo then
	// leaves it alone, because that is how lvsprep found it.
	Changed bool `json:"changed"`
	// Pending is set while a change is being made: the record is written
	// before the change and cleared after it, so a kill in between leaves a
	// record that --undo acts on (every revert also works on a change that
	// did not happen).
	Pending     bool              `json:"pending,omitempty"`
	Prior       string            `json:"prior,omitempty"`        // a sysctl's previous value
	PriorRoutes []netfilter.Route `json:"prior_routes,omitempty"` // default routes replaced
}

// Key identifies the setting a step changes, so that two profiles touching
// the same setting can be recognised (see undo's hand-over).
func (s step) Key() string {
	switch s.Kind {
	case kindModule:
		return "module " + s.Module
	case kindSysctl:
		return "sysctl " + s.Sysctl
	case kindLinkUp:
		return "link " + s.Dev
	case kindAddr:
		return "address " + s.Dev + " " + s.Addr.String()
	case kindRoute:
		return "default-route " + s.Route.Family().String()
	case kindRule:
		return "rule " + s.Family.String() + " " + s.Table + " " + s.Chain + " " + strings.Join(s.Rule, " ")
	}
	return string(s.Kind)
}

// Setting is the step's setting in a few words, for tables.
func (s step) Setting() string {
	switch s.Kind {
	case kindModule:
		return "module " + s.Module
	case kindSysctl:
		return netfilter.SysctlName(s.Sysctl)
	case kindLinkUp:
		return "link " + s.Dev
	case kindAddr:
		return "address on " + s.Dev
	case kindRoute:
		if s.Route.Family() == netfilter.IPv6 {
			return "IPv6 default route"
		}
		return "default route"
	case kindRule:
		return netfilter.IPTablesCommand(s.Family) + " -t " + s.Table + " " + s.Chain
	}
	return string(s.Kind)
}

// uses reports whether the step concerns the interface dev.
func (s step) uses(dev string) bool {
	return s.Dev == dev || (s.Kind == kindSysctl && strings.Contains(s.Sysctl, "/conf/"+dev+"/"))
}

// moduleRoles say what each module a profile loads is for, in check's
// lines.
var moduleRoles = map[string]string{
	"ip_vs": "IPVS", "ip_vs_ftp": "FTP helper", "ip_vs_mh": "mh scheduler", "xt_ipvs": "ipvs match",
	"ipip": "tunnel", "ip6_tunnel": "tunnel",
}

// sysctlRoles say what a sysctl is for, by its last name.
var sysctlRoles = map[string]string{
	"ip_forward": "forwarding", "forwarding": "forwarding", "arp_ignore": "ARP", "arp_announce": "ARP",
	"rp_filter": "reverse-path filter",
}

// Check is what check verifies for the step, in words with the wanted
// value: "ARP: arp_ignore=1 on eth0", "VIP 10.0.0.100/32 on lo". It names
// the setting, never the command that makes it.
func (s step) Check() string {
	switch s.Kind {
	case kindModule:
		if role, ok := moduleRoles[s.Module]; ok {
			return role + ": module " + s.Module + " loaded"
		}
		return "module " + s.Module + " loaded"
	case kindSysctl:
		parts := strings.Split(s.Sysctl, "/")
		name := parts[len(parts)-1]
		value := name + "=" + s.Value
		if len(s.Accept) > 0 {
			value += " (or " + strings.Join(s.Accept, ", ") + ")"
		}
		switch {
		case len(parts) == 5 && parts[2] == "conf":
			// net/ipv4/conf/DEV/NAME
			role := sysctlRoles[name]
			if parts[1] == "ipv6" {
				role = "IPv6 " + role
			}
			return strings.TrimPrefix(role+": ", ": ") + value + " on " + strings.ReplaceAll(parts[3], ".", "/")
		case len(parts) == 4 && parts[2] == "vs":
			return "IPVS: " + value
		case sysctlRoles[name] != "":
			return sysctlRoles[name] + ": " + value
		}
		return netfilter.SysctlName(s.Sysctl) + "=" + s.Value
	case kindLinkUp:
		return "link " + s.Dev + " up"
	case kindAddr:
		return "VIP " + s.Addr.String() + " on " + s.Dev
	case kindRoute:
		c := "default route " + strings.Join(s.Route.Args(), " ")
		if s.Route.Family() == netfilter.IPv6 {
			c = "IPv6 " + c
		}
		return c
	case kindRule:
		where := " (" + s.Table + " " + s.Chain + ")"
		arg := func(flag string) string {
			if i := slices.Index(s.Rule, flag); i >= 0 && i+1 < len(s.Rule) {
				return s.Rule[i+1]
			}
			return ""
		}
		switch {
		case slices.Contains(s.Rule, "MASQUERADE"):
			c := "masquerading: " + arg("-s") + " going elsewhere"
			if o := arg("-o"); o != "" {
				c += " through " + o
			}
			return c + where
		case slices.Contains(s.Rule, "SNAT"):
			c := "source rewrite: IPVS connections to " + arg("--vaddr")
			if p := arg("--vport"); p != "" {
				c += " " + arg("--vproto") + " port " + p
			}
			return c + " from " + arg("--to-source") + where
		case slices.Contains(s.Rule, "--notrack"):
			return "no conntrack: packets to " + arg("-d") + where
		}
		return "iptables rule " + strings.Join(s.Rule, " ") + where
	}
	return string(s.Kind)
}

// status is what a check found for one step.
type status struct {
	OK       bool
	Conflict string // set when applying would clash with what is there
	Have     string
	Err      error // the state could not be read
}

func (st status) word() string {
	switch {
	case st.Err != nil:
		return "unknown"
	case st.OK:
		return "ok"
	case st.Conflict != "":
		return "conflict"
	case st.Have == "absent" || st.Have == "not loaded" || st.Have == "down" || st.Have == "none" || strings.HasPrefix(st.Have, "no interface "):
		return "missing"
	}
	return "wrong"
}

// check reads the host's current state for the step.
func (h *Host) check(s step) status {
	switch s.Kind {
	case kindModule:
		ok, err := h.Modules.Loaded(s.Module)
		if err != nil {
			return status{Err: err}
		}
		if ok {
			return status{OK: true, Have: "loaded"}
		}
		return status{Have: "not loaded"}
	case kindSysctl:
		v, err := h.Sysctl.Get(s.Sysctl)
		if errors.Is(err, os.ErrNotExist) {
			return status{Have: "absent"}
		} else if err != nil {
			return status{Err: err}
		}
		return status{OK: v == s.Value || slices.Contains(s.Accept, v), Have: v}
	case kindLinkUp:
		up, err := h.Links.IsUp(s.Dev)
		if errors.Is(err, netfilter.ErrNoLink) {
			return status{Have: "absent"}
		} else if err != nil {
			return status{Err: err}
		}
		if up {
			return status{OK: true, Have: "up"}
		}
		return status{Have: "down"}
	case kindAddr:
		addrs, err := h.Links.Addrs(s.Dev)
		if errors.Is(err, netfilter.ErrNoLink) {
			return status{Have: "no interface " + s.Dev}
		} else if err != nil {
			return status{Err: err}
		}
		if slices.Contains(addrs, s.Addr) {
			return status{OK: true, Have: s.Addr.String()}
		}
		for _, a := range addrs {
			if a.Addr() == s.Addr.Addr() {
				return status{Have: a.String(), Conflict: fmt.Sprintf("%s is on %s as %s, not %s; remove it first (ip address del %s dev %s)", a.Addr(), s.Dev, a, s.Addr, a, s.Dev)}
			}
		}
		return status{Have: "absent"}
	case kindRoute:
		rs, err := h.Links.DefaultRoutes(s.Route.Family())
		if err != nil {
			return status{Err: err}
		}
		if len(rs) == 0 {
			return status{Have: "none"}
		}
		var have []string
		for _, r := range rs {
			have = append(have, r.String())
		}
		ok := len(rs) == 1 && rs[0].Gateway == s.Route.Gateway && (s.Route.Dev == "" || rs[0].Dev == s.Route.Dev)
		return status{OK: ok, Have: strings.Join(have, "; ")}
	case kindRule:
		ipt, err := h.iptables(s.Family)
		if err != nil {
			return status{Err: err}
		}
		ok, err := ipt.Exists(s.Table, s.Chain, s.Rule...)
		if err != nil {
			return status{Err: err}
		}
		if ok {
			return status{OK: true, Have: "present"}
		}
		return status{Have: "absent"}
	}
	return status{Err: fmt.Errorf("unknown step kind %q", s.Kind)}
}

// prepare returns the record of a change about to be made: what is there
// now, which --undo puts back. The caller has checked that the setting is
// not yet in place.
func (h *Host) prepare(s step) (record, error) {
	rec := record{step: s, Changed: true}
	switch s.Kind {
	case kindSysctl:
		prior, err := h.Sysctl.Get(s.Sysctl)
		if err != nil {
			return rec, err
		}
		rec.Prior = prior
	case kindRoute:
		prior, err := h.Links.DefaultRoutes(s.Route.Family())
		if err != nil {
			return rec, err
		}
		rec.PriorRoutes = prior
	}
	return rec, nil
}

// change makes the change that prepare recorded.
func (h *Host) change(rec record) error {
	s := rec.step
	switch s.Kind {
	case kindModule:
		if err := h.Modules.Load(s.Module); err != nil {
			return fmt.Errorf("loading kernel module %s: %w", s.Module, err)
		}
	case kindSysctl:
		return h.Sysctl.Set(s.Sysctl, s.Value)
	case kindLinkUp:
		return h.Links.SetUp(s.Dev, true)
	case kindAddr:
		return h.Links.AddAddr(s.Dev, s.Addr)
	case kindRoute:
		return h.switchRoutes(rec.PriorRoutes, []netfilter.Route{*s.Route})
	case kindRule:
		ipt, err := h.iptables(s.Family)
		if err != nil {
			return err
		}
		if err := ipt.Append(s.Table, s.Chain, s.Rule...); err != nil {
			return fmt.Errorf("adding rule %s: %w", ruleCommand(s, "-A"), err)
		}
	default:
		return fmt.Errorf("unknown step kind %q", s.Kind)
	}
	return nil
}

// replacing pairs each new default route with an old one of the same
// metric, which it replaces in one step; -1 where there is none.
func replacing(old, new []netfilter.Route) []int {
	pair := make([]int, len(new))
	used := make([]bool, len(old))
	for i, n := range new {
		pair[i] = -1
		for j, o := range old {
			if !used[j] && o.Family() == n.Family() && o.Metric == n.Metric {
				pair[i], used[j] = j, true
				break
			}
		}
	}
	return pair
}

// switchRoutes makes new the default routes in place of old without a
// moment with none: a new route replaces the old one of its metric in one
// step, or is added before the old ones are deleted. If that fails midway
// it puts old back.
func (h *Host) switchRoutes(old, new []netfilter.Route) error {
	pair := replacing(old, new)
	var added, replaced []int
	var deleted []netfilter.Route
	restore := func(err error) error {
		for _, o := range deleted {
			if rerr := h.Links.AddRoute(o); rerr != nil {
				err = errors.Join(err, fmt.Errorf("putting back route %s: %w", o, rerr))
			}
		}
		for _, i := range replaced {
			if rerr := h.Links.ReplaceRoute(old[pair[i]]); rerr != nil {
				err = errors.Join(err, fmt.Errorf("putting back route %s: %w", old[pair[i]], rerr))
			}
		}
		for _, i := range added {
			_ = h.Links.DelRoute(new[i])
		}
		return err
	}
	for i, n := range new {
		var err error
		if pair[i] >= 0 {
			err = h.Links.ReplaceRoute(n)
			replaced = append(replaced, i)
		} else {
			err = h.Links.AddRoute(n)
			added = append(added, i)
		}
		if err != nil {
			return restore(err)
		}
	}
	for j, o := range old {
		if slices.Contains(pair, j) {
			continue
		}
		if err := h.Links.DelRoute(o); err != nil {
			return restore(err)
		}
		deleted = append(deleted, o)
	}
	return nil
}

// switchCommands are the ip commands equivalent to switchRoutes.
func switchCommands(old, new []netfilter.Route) []string {
	pair := replacing(old, new)
	var cs []string
	for i, n := range new {
		if pair[i] >= 0 {
			cs = append(cs, routeCommand("replace", n))
		} else {
			cs = append(cs, routeCommand("add", n))
		}
	}
	for j, o := range old {
		if !slices.Contains(pair, j) {
			cs = append(cs, routeCommand("del", o))
		}
	}
	return cs
}

// revert puts back what the record says was there before. left is set,
// with the reason, when the setting stays as lvsprep made it without that
// being a failure (a module that something uses stays loaded): the caller
// must then not report it as reverted.
func (h *Host) revert(r record) (left string, err error) {
	if !r.Changed {
		return "", nil
	}
	switch r.Kind {
	case kindModule:
		if loaded, err := h.Modules.Loaded(r.Module); err == nil && !loaded {
			return "", nil
		}
		if err := h.Modules.Unload(r.Module); err != nil {
			return fmt.Sprintf("module %s loaded: %v", r.Module, err), nil
		}
	case kindSysctl:
		return "", h.Sysctl.Set(r.Sysctl, r.Prior)
	case kindLinkUp:
		up, err := h.Links.IsUp(r.Dev)
		if errors.Is(err, netfilter.ErrNoLink) {
			return "", nil // gone with its module: nothing to put down
		} else if err != nil {
			return "", err
		}
		if up {
			return "", h.Links.SetUp(r.Dev, false)
		}
	case kindAddr:
		addrs, err := h.Links.Addrs(r.Dev)
		if errors.Is(err, netfilter.ErrNoLink) {
			return "", nil
		} else if err != nil {
			return "", err
		}
		if slices.Contains(addrs, r.Addr) {
			return "", h.Links.DelAddr(r.Dev, r.Addr)
		}
	case kindRoute:
		cur, err := h.Links.DefaultRoutes(r.Route.Family())
		if err != nil {
			return "", err
		}
		var ours, others []netfilter.Route
		for _, c := range cur {
			if c.Gateway == r.Route.Gateway && (r.Route.Dev == "" || c.Dev == r.Route.Dev) {
				ours = append(ours, c)
			} else {
				others = append(others, c)
			}
		}
		var missing []netfilter.Route
		for _, p := range r.PriorRoutes {
			if !slices.Contains(others, p) {
				missing = append(missing, p)
			}
		}
		return "", h.switchRoutes(ours, missing)
	case kindRule:
		ipt, err := h.iptables(r.Family)
		if err != nil {
			return "", err
		}
		ok, err := ipt.Exists(r.Table, r.Chain, r.Rule...)
		if err != nil {
			return "", err
		}
		if ok {
			if err := ipt.Delete(r.Table, r.Chain, r.Rule...); err != nil {
				return "", fmt.Errorf("removing rule %s: %w", ruleCommand(r.step, "-D"), err)
			}
		}
	default:
		return "", fmt.Errorf("unknown step kind %q", r.Kind)
	}
	return "", nil
}

func ruleCommand(s step, op string) string {
	return strings.Join(append([]string{netfilter.IPTablesCommand(s.Family), "-t", s.Table, op, s.Chain}, s.Rule...), " ")
}

func ipCommand(f netfilter.Family, args ...string) string {
	if f == netfilter.IPv6 {
		args = append([]string{"-6"}, args...)
	}
	return strings.Join(append([]string{"ip"}, args...), " ")
}

func routeCommand(op string, r netfilter.Route) string {
	return ipCommand(r.Family(), append([]string{"route", op, "default"}, r.Args()...)...)
}

// applyCommands are the shell commands equivalent to applying the step;
// priorRoutes are the default routes a route step would replace.
func applyCommands(s step, priorRoutes []netfilter.Route) []string {
	switch s.Kind {
	case kindModule:
		return []string{"modprobe " + s.Module}
	case kindSysctl:
		return []string{"sysctl -w " + netfilter.SysctlName(s.Sysctl) + "=" + s.Value}
	case kindLinkUp:
		return []string{"ip link set dev " + s.Dev + " up"}
	case kindAddr:
		c := "ip address add " + s.Addr.String()
		if s.Addr.Addr().Is4() && s.Addr.Bits() < 31 {
			c += " brd +" // netlink.AddrAdd sets the broadcast address too
		}
		c += " dev " + s.Dev
		if s.Addr.Addr().Is6() {
			c += " nodad"
		}
		return []string{c}
	case kindRoute:
		return switchCommands(priorRoutes, []netfilter.Route{*s.Route})
	case kindRule:
		return []string{ruleCommand(s, "-A")}
	}
	return nil
}

// revertCommands are the shell commands equivalent to reverting the record.
func revertCommands(r record) []string {
	if !r.Changed {
		return nil
	}
	switch r.Kind {
	case kindModule:
		return []string{"modprobe -r " + r.Module}
	case kindSysctl:
		return []string{"sysctl -w " + netfilter.SysctlName(r.Sysctl) + "=" + r.Prior}
	case kindLinkUp:
		return []string{"ip link set dev " + r.Dev + " down"}
	case kindAddr:
		return []string{"ip address del " + r.Addr.String() + " dev " + r.Dev}
	case kindRoute:
		return switchCommands([]netfilter.Route{*r.Route}, r.PriorRoutes)
	case kindRule:
		return []string{ruleCommand(r.step, "-D")}
	}
	return nil
}
