// Package bench measures our ipvsadm against Debian's and the kernel floor.
//
// The floor is the bare netlink requests of the same work. All run in the
// lab, in one VM boot: restore (-R), list (-Ln), save (-Sn), zero (-Z) and
// flush (-C) of tables in several layouts (services spread over the kernel's
// hash buckets or sharing one, many ports on one address, fwmark, IPv6) and
// sizes (100 to 50,000 services, 1 to 100 destinations each). It also
// measures the start-up on an empty table and the peak memory of -Ln and -R.
// The three run alternately, each first in turn, and medians are compared
// (TestBenchmarks). TestGrowth measures how ours and the floor grow from one
// size to ten times it, both sizes back to back in every round.
//
// It holds the lab tests (files with the build tag lab) and two helpers:
// package benchdata (the results, their tables and their JSON) and the
// tool benchplot (the plot and tables of docs/benchmarks.md). make bench
// runs the tests at full size and then benchplot; a plain make lab runs
// them at smoke size, as a check that the measurements still work.
// Durations are reported, never asserted: the VM's speed follows the
// host's load. Peak memory is asserted, because it does not.
package bench
