package lvsprep

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lvskit/lvskit/internal/netnsid"
)

// A state directory belongs to one network namespace of one boot. Network
// namespaces are told apart by the inode of /proc/self/ns/net, but the
// kernel reuses those numbers as soon as a namespace is freed, so a
// directory named after an inode may hold the state of a namespace that is
// gone, whose settings vanished with it. Each directory therefore records
// the identity of the namespace that wrote it (.netns); a directory written
// by another one is stale.

const identityFile = ".netns"

// checkIdentity compares the identity recorded in the store with this
// namespace's. A store without one gets it when write is set. It returns
// the recorded identity when the store was written by another namespace or
// boot.
func (r *runner) checkIdentity(s *store, write bool) (stale *netnsid.Identity, err error) {
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
	var rec netnsid.Identity
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(s.path, identityFile), err)
	}
	if rec.Same(cur) {
		return nil, nil
	}
	return &rec, nil
}
