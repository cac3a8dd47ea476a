package netfilter

import (
	"fmt"

	"github.com/coreos/go-iptables/iptables"
)

// Family is an address family as the tools spell it: IPv4 or IPv6.
type Family int

// The address families lvsprep deals with.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	if f == IPv6 {
		return "ipv6"
	}
	return "ipv4"
}

// IPTables is the subset of go-iptables' *iptables.IPTables that lvsprep
// uses, so the real one satisfies it and tests use FakeIPTables. Rules are
// given as iptables(8) arguments after the chain name, e.g.
// "-s", "172.16.0.0/24", "-j", "MASQUERADE".
type IPTables interface {
	Exists(table, chain string, rulespec ...string) (bool, error)
	Append(table, chain string, rulespec ...string) error
	Insert(table, chain string, pos int, rulespec ...string) error
	Delete(table, chain string, rulespec ...string) error
	List(table, chain string) ([]string, error)
}

var _ IPTables = (*iptables.IPTables)(nil)

// NewIPTables returns go-iptables for the family: it runs iptables or
// ip6tables (whichever backend, nft or legacy, the host's alternatives pick).
// It fails when the command is missing.
func NewIPTables(f Family) (IPTables, error) {
	proto := iptables.ProtocolIPv4
	if f == IPv6 {
		proto = iptables.ProtocolIPv6
	}
	ipt, err := iptables.New(iptables.IPFamily(proto))
	if err != nil {
		return nil, fmt.Errorf("finding %s: %w", IPTablesCommand(f), err)
	}
	return ipt, nil
}

// IPTablesCommand is the command name for the family: iptables or ip6tables.
func IPTablesCommand(f Family) string {
	if f == IPv6 {
		return "ip6tables"
	}
	return "iptables"
}
