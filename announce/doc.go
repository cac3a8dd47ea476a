// Package announce holds the addresses a director announces.
//
// They live on a device that lives only as long as the process that made
// it.
//
// The device is one end of a veth pair whose other end is in a network
// namespace no file and no other process holds: when the process ends, by
// exit, signal, SIGKILL or the OOM killer, the kernel frees the namespace,
// deletes the pair, and the routing daemon that exports the device's
// addresses (BIRD's direct protocol) withdraws them. The package changes
// nothing else on the host and never logs.
package announce
