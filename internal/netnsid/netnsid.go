// Package netnsid reads what identifies the calling thread's network
// namespace for as long as it exists: its cookie. lvsctl's journal and
// lvsprep's state both belong to one namespace, and an inode number alone
// is reused once a namespace is gone.
package netnsid

// Cookie is the calling thread's network namespace cookie
// (SO_NETNS_COOKIE): unique for the life of the boot. It is 0, with no
// error, where the kernel predates the option (Linux 5.14) and off Linux.
func Cookie() (uint64, error) { return cookie() }
