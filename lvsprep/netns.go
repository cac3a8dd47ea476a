package lvsprep

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/lvskit/lvskit/internal/netnsid"
)

// A state directory belongs to one network namespace of one boot. Network
// namespaces are told apart by the inode of /proc/self/ns/net, but the
// kernel reuses those numbers as soon as a namespace is freed, so a
// directory named after an inode may hold the state of a namespace that is
// gone, whose settings vanished with it. Each directory therefore records
// the identity of the namespace that wrote it (.netns); a directory written
// by another one is stale.

// nsIdentity identifies a network namespace instance: the kernel's boot id,
// the namespace's cookie (SO_NETNS_COOKIE, Linux 5.14 and later: a 64-bit
// number never reused while the system runs; 0 where the kernel lacks it)
// and its inode.
type nsIdentity struct {
	BootID string `json:"boot_id"`
	Cookie uint64 `json:"netns_cookie"`
	Inode  uint64 `json:"netns_inode"`
}

func (a nsIdentity) same(b nsIdentity) bool {
	return a.BootID == b.BootID && a.Inode == b.Inode && (a.Cookie == 0 || b.Cookie == 0 || a.Cookie == b.Cookie)
}

func (a nsIdentity) String() string {
	return fmt.Sprintf("boot %s, netns inode %d, cookie %d", a.BootID, a.Inode, a.Cookie)
}

// currentIdentity reads the calling process's network namespace identity.
func currentIdentity() (nsIdentity, error) {
	var id nsIdentity
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return id, fmt.Errorf("reading the boot id: %w", err)
	}
	id.BootID = strings.TrimSpace(string(b))
	// The calling thread's namespace: the one its sockets (and the
	// cookie below) belong to.
	fi, err := os.Stat("/proc/thread-self/ns/net")
	if err != nil {
		return id, fmt.Errorf("reading the network namespace: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.Inode = st.Ino
	}
	c, err := netnsid.Cookie()
	if err != nil {
		return id, fmt.Errorf("reading the network namespace cookie: %w", err)
	}
	id.Cookie = c
	return id, nil
}

const identityFile = ".netns"

// checkIdentity compares the identity recorded in the store with this
// namespace's. A store without one gets it when write is set. It returns
// the recorded identity when the store was written by another namespace or
// boot.
func (r *runner) checkIdentity(s *store, write bool) (stale *nsIdentity, err error) {
	if r.h.Identity == nil || s.dir == nil {
		return nil, nil
	}
	cur, err := r.h.Identity()
	if err != nil {
		return nil, err
	}
	b, err := s.readFile(identityFile)
	if errors.Is(err, os.ErrNotExist) {
		if !write {
			return nil, nil
		}
		b, _ := json.Marshal(cur)
		return nil, s.writeFile(identityFile, append(b, '\n'))
	} else if err != nil {
		return nil, err
	}
	var rec nsIdentity
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(s.path, identityFile), err)
	}
	if rec.same(cur) {
		return nil, nil
	}
	return &rec, nil
}
