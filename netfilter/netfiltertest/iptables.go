package netfiltertest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lvskit/lvskit/netfilter"
)

// FakeIPTables is an in-memory IPTables: a map from "table/chain" to the
// chain's rules in order, each rule its arguments joined by spaces. Rules are
// compared as written (the real iptables normalises some spellings; lvsprep
// always writes the normal form). Faults makes an operation fail: the key is
// "append", "insert", "delete", "exists" or "list".
type FakeIPTables struct {
	Rules  map[string][]string
	Faults map[string]error
}

// NewFakeIPTables returns an empty fake.
func NewFakeIPTables() *FakeIPTables {
	return &FakeIPTables{Rules: map[string][]string{}, Faults: map[string]error{}}
}

var _ netfilter.IPTables = (*FakeIPTables)(nil)

func fakeKey(table, chain string) string { return table + "/" + chain }

func (f *FakeIPTables) fault(op string) error {
	if err := f.Faults[op]; err != nil {
		return fmt.Errorf("fake iptables %s: %w", op, err)
	}
	return nil
}

// Exists reports whether the rule is in the chain.
func (f *FakeIPTables) Exists(table, chain string, rulespec ...string) (bool, error) {
	if err := f.fault("exists"); err != nil {
		return false, err
	}
	return slices.Contains(f.Rules[fakeKey(table, chain)], strings.Join(rulespec, " ")), nil
}

// Append adds the rule at the end of the chain.
func (f *FakeIPTables) Append(table, chain string, rulespec ...string) error {
	if err := f.fault("append"); err != nil {
		return err
	}
	k := fakeKey(table, chain)
	f.Rules[k] = append(f.Rules[k], strings.Join(rulespec, " "))
	return nil
}

// Insert adds the rule at position pos (1 is the head), as iptables -I does.
func (f *FakeIPTables) Insert(table, chain string, pos int, rulespec ...string) error {
	if err := f.fault("insert"); err != nil {
		return err
	}
	k := fakeKey(table, chain)
	if pos < 1 || pos > len(f.Rules[k])+1 {
		return fmt.Errorf("fake iptables: index of insertion too big: %d", pos)
	}
	f.Rules[k] = slices.Insert(f.Rules[k], pos-1, strings.Join(rulespec, " "))
	return nil
}

// Delete removes the first matching rule; like iptables -D it fails when
// there is none.
func (f *FakeIPTables) Delete(table, chain string, rulespec ...string) error {
	if err := f.fault("delete"); err != nil {
		return err
	}
	k := fakeKey(table, chain)
	i := slices.Index(f.Rules[k], strings.Join(rulespec, " "))
	if i < 0 {
		return fmt.Errorf("fake iptables: Bad rule (does a matching rule exist in that chain?)")
	}
	f.Rules[k] = slices.Delete(f.Rules[k], i, i+1)
	return nil
}

// List returns the chain as iptables -S prints it.
func (f *FakeIPTables) List(table, chain string) ([]string, error) {
	if err := f.fault("list"); err != nil {
		return nil, err
	}
	out := []string{"-P " + chain + " ACCEPT"}
	for _, r := range f.Rules[fakeKey(table, chain)] {
		out = append(out, "-A "+chain+" "+r)
	}
	return out, nil
}
