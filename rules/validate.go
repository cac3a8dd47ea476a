package rules

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/lvskit/lvskit/ipvs"
)

// Problem is a rule the kernel would refuse although ipvsadm's parser
// accepts it, with the place it was written.
type Problem struct {
	Source Source
	Msg    string
}

func (p Problem) String() string {
	if s := p.Source.String(); s != "" {
		return s + ": " + p.Msg
	}
	return p.Msg
}

// Problems is every rule of a set the kernel would refuse.
type Problems []Problem

// maxProblems bounds the problems an error lists.
const maxProblems = 10

func (ps Problems) Error() string {
	lines := make([]string, 0, min(len(ps), maxProblems)+1)
	for i, p := range ps {
		if i == maxProblems {
			lines = append(lines, fmt.Sprintf("and %d more", len(ps)-maxProblems))
			break
		}
		lines = append(lines, p.String())
	}
	return strings.Join(lines, "\n")
}

// HasModule reports whether the kernel has a module or can load it; an
// error means it cannot tell, and the name is then left to the kernel.
type HasModule func(name string) (bool, error)

// Validate finds the rules of set that the kernel refuses whatever its
// table holds: schedulers and persistence engines it has no module for
// (the kernel loads ip_vs_NAME and ip_vs_pe_NAME on demand), destination
// addresses that are not unicast, and a lower threshold above the upper
// one (ipvsadm's parser, which reads every file, catches the rest it can). It returns nil or Problems. Each message
// ends with ipvsadm's wording of the kernel's answer.
func Validate(set *Set, has HasModule) error {
	var ps Problems
	known := map[string]bool{}
	module := func(name string) bool {
		ok, seen := known[name]
		if !seen {
			var err error
			if ok, err = has(name); err != nil {
				ok = true // unknown: the kernel decides
			}
			known[name] = ok
		}
		return ok
	}
	for i := range set.Services {
		s := &set.Services[i]
		if sched := s.Scheduler; sched != "" && sched != "none" && !module("ip_vs_"+sched) {
			ps = append(ps, Problem{s.Source, fmt.Sprintf("scheduler %q: this kernel has no module ip_vs_%s "+
				"(Scheduler or persistence engine not found)", sched, sched)})
		}
		if pe := s.PEName; pe != "" && !module("ip_vs_pe_"+pe) {
			ps = append(ps, Problem{s.Source, fmt.Sprintf("persistence engine %q: this kernel has no module ip_vs_pe_%s "+
				"(Scheduler or persistence engine not found)", pe, pe)})
		}
		for j := range s.Dests {
			d := &s.Dests[j]
			if msg := destProblem(&d.Destination); msg != "" {
				ps = append(ps, Problem{s.SourceOf(d), fmt.Sprintf("real server %s: %s", DestKeyOf(&d.Destination), msg)})
			}
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// invalidOperation is ipvsadm's wording of EINVAL.
const invalidOperation = "Invalid operation.  Possibly wrong module version, address not unicast, ..."

// destProblem is why the kernel refuses d (ip_vs_add_dest,
// ip_vs_new_dest), or "".
func destProblem(d *ipvs.Destination) string {
	switch {
	case d.LThreshold > d.UThreshold:
		return fmt.Sprintf("lower threshold %d is above the upper threshold %d, which the kernel compares even when it is 0 (no limit) "+
			"(Numerical result out of range)", d.LThreshold, d.UThreshold)
	case !unicast(d.Addr):
		return "not a unicast address (" + invalidOperation + ")"
	}
	return ""
}

// unicast reports whether the kernel takes a as a destination address
// whatever the routes: not unspecified, multicast, an IPv4-mapped IPv6
// address, or a broadcast address every host has.
func unicast(a netip.Addr) bool {
	switch {
	case !a.IsValid(), a.IsUnspecified(), a.IsMulticast(), a.Is4In6():
		return false
	case a.Is4():
		b := a.As4()
		return b != [4]byte{255, 255, 255, 255} && b != [4]byte{127, 255, 255, 255}
	}
	return true
}
