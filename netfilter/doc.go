// Package netfilter is lvsprep's window onto the host settings it changes.
//
// Those are iptables rules, sysctls under /proc/sys, network links,
// addresses and default routes, and loaded kernel modules.
//
// Each facility is a small interface with a real implementation and an
// in-memory fake, so the companion tool's logic is tested on any machine
// without root, and the real implementations are exercised in the lab. The
// package only reads and changes state and returns errors: it never logs,
// exits or runs modprobe (loading modules is the application's decision).
package netfilter
