// Package netnsid tells network namespaces apart.
//
// Tools that keep state per namespace (lvsctl's journal, lvsprep's state)
// use it: it gives the directory each one's state lives in, its inode, and
// its cookie, which unlike an inode number is never reused while the system
// runs.
package netnsid

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Cookie is the calling thread's network namespace cookie
// (SO_NETNS_COOKIE): unique for the life of the boot. It is 0, with no
// error, where the kernel predates the option (Linux 5.14) and off Linux.
func Cookie() (uint64, error) { return cookie() }

// Inode is the inode number of the process's network namespace
// (/proc/self/ns/net), 0 where it cannot be read. Namespaces alive
// at the same time have different inodes, but a number is reused once its
// namespace is gone: pair it with the Cookie.
func Inode() uint64 {
	if fi, err := os.Stat("/proc/self/ns/net"); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return st.Ino
		}
	}
	return 0
}

// Dir is the directory below root that holds the state of the process's
// network namespace: a namespace is a separate network stack
// (addresses, routes, IPVS table, per-namespace sysctls) that shares /run
// with the host, so tools keeping state per table need one directory per
// namespace. The initial namespace uses root itself, one named by
// `ip netns add` root/netns-NAME, any other root/netns-INODE.
func Dir(root string) string {
	self, err := os.Stat("/proc/self/ns/net")
	if err != nil {
		return root
	}
	if initial, err := os.Stat("/proc/1/ns/net"); err != nil || os.SameFile(self, initial) {
		return root
	}
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			if fi, err := os.Stat(filepath.Join("/run/netns", e.Name())); err == nil && os.SameFile(self, fi) {
				return filepath.Join(root, "netns-"+e.Name())
			}
		}
	}
	if st, ok := self.Sys().(*syscall.Stat_t); ok {
		return filepath.Join(root, "netns-"+strconv.FormatUint(st.Ino, 10))
	}
	return root
}

// Identity tells one network namespace of one boot from every other: the
// boot id, the namespace's inode, and its cookie (0 where the kernel has
// none). State written under one identity is stale under another.
type Identity struct {
	Boot   string `json:"boot_id"`
	Cookie uint64 `json:"netns_cookie"`
	Inode  uint64 `json:"netns_inode"`
}

// Current reads the calling thread's identity: the namespace its sockets
// belong to, which a thread may have changed from the process's.
func Current() (Identity, error) {
	var id Identity
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return id, fmt.Errorf("reading the boot id: %w", err)
	}
	id.Boot = string(bytes.TrimSpace(b))
	fi, err := os.Stat("/proc/thread-self/ns/net")
	if err != nil {
		return id, fmt.Errorf("reading the network namespace: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.Inode = st.Ino
	}
	if id.Cookie, err = Cookie(); err != nil {
		return id, fmt.Errorf("reading the network namespace cookie: %w", err)
	}
	return id, nil
}

// Same reports whether a and b are one namespace of one boot: the same
// boot and inode, and the same cookie where both have one.
func (a Identity) Same(b Identity) bool {
	return a.Boot == b.Boot && a.Inode == b.Inode && (a.Cookie == 0 || b.Cookie == 0 || a.Cookie == b.Cookie)
}

func (a Identity) String() string {
	return fmt.Sprintf("boot %s, netns inode %d, cookie %d", a.Boot, a.Inode, a.Cookie)
}
