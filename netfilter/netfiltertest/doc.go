// Package netfiltertest holds in-memory doubles of package netfilter's host
// interfaces.
//
// They double iptables rules, links and addresses, sysctls and kernel
// modules for lvsprep's host tests: each keeps what a change would do to the
// host, fails where the real host would, and lets a test compare snapshots.
package netfiltertest
