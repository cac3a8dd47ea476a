package lvsprep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// defaultStateDir is where state files live. /run is right for them: it is
// emptied at boot, exactly like every setting lvsprep makes (sysctls,
// addresses, routes, rules and modules do not survive a reboot either), so
// a state file never describes changes that are gone.
const defaultStateDir = "/run/lvsprep"

// maxStateSize bounds what is read from a state file: a real one holds a
// dozen records, a few KiB.
const maxStateSize = 1 << 20

// state is a state file: the journal of an applied profile. Each change is
// recorded before it is made (a pending record) and again once it is made,
// so after a kill at any point --undo finds everything that may have
// changed.
type state struct {
	Profile string    `json:"profile"`
	Args    []string  `json:"args"`
	Applied time.Time `json:"applied"`
	Records []record  `json:"records"`
}

func statePath(dir, key string) string { return filepath.Join(dir, key+".json") }

// A store is a state directory, opened without following symbolic links
// and checked: it and every directory above it belong to root (or to the
// trusted user, for tests and read-only use), and nobody else may write
// into it. Every file in it is reached through the open directory.
type store struct {
	path  string
	dir   *os.File // nil when the directory does not exist (read-only use)
	trust int      // a uid trusted besides root; -1 for none
}

// errUntrusted marks state that lvsprep refuses to act on.
var errUntrusted = errors.New("not trusted")

func (s *store) trusted(uid uint32) bool { return uid == 0 || int(uid) == s.trust }

// openStore opens the state directory at path. With create (a command that
// changes the host), missing directories are made 0700 and an existing
// state directory with a looser mode is tightened to 0700; without it, a
// missing directory is an empty store.
func openStore(path string, trust int, create bool) (*store, error) {
	s := &store{path: path, trust: trust}
	f, err := s.openDir(path, create)
	if errors.Is(err, os.ErrNotExist) && !create {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("state directory %s: %w", path, err)
	}
	if !s.trusted(st.Uid) {
		f.Close()
		return nil, fmt.Errorf("state directory %s belongs to uid %d, not root: refusing to use it (%w)", path, st.Uid, errUntrusted)
	}
	if st.Mode&0o777 != 0o700 {
		if !create && st.Mode&0o022 != 0 {
			f.Close()
			return nil, fmt.Errorf("state directory %s is writable by others (mode %04o): refusing to read it (%w)", path, st.Mode&0o7777, errUntrusted)
		}
		if create {
			if err := unix.Fchmod(int(f.Fd()), 0o700); err != nil {
				f.Close()
				return nil, fmt.Errorf("tightening state directory %s to 0700: %w", path, err)
			}
		}
	}
	s.dir = f
	return s, nil
}

func (s *store) close() {
	if s != nil && s.dir != nil {
		s.dir.Close()
	}
}

// openDir opens path as a directory, component by component from /, never
// following a symbolic link: the state directory's own name must not be one,
// and links above it (as /var/run -> /run) are resolved first and must
// belong to root. Each directory on the way must belong to root or the
// trusted user and must not be writable by others unless sticky (/tmp).
func (s *store) openDir(path string, create bool) (*os.File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	parent, err := s.resolveParent(filepath.Dir(abs))
	if err != nil {
		return nil, err
	}
	comps := append(strings.FieldsFunc(parent, func(r rune) bool { return r == '/' }), filepath.Base(abs))
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	at := "/"
	for i, c := range comps {
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(fd, c, 0o700); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(fd)
		at = filepath.Join(at, c)
		switch {
		case errors.Is(err, unix.ENOENT):
			return nil, fmt.Errorf("state directory %s: %w", at, os.ErrNotExist)
		case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
			return nil, fmt.Errorf("state directory %s: %s is a symbolic link or not a directory: refusing to follow it (%w)", path, at, errUntrusted)
		case err != nil:
			return nil, fmt.Errorf("state directory %s: opening %s: %w", path, at, err)
		}
		fd = next
		if i == len(comps)-1 {
			break // the state directory itself: checked by openStore
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, err
		}
		if !s.trusted(st.Uid) || (st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0) {
			unix.Close(fd)
			return nil, fmt.Errorf("state directory %s: %s belongs to uid %d with mode %04o, so others could replace what is in it: refusing to use it (%w)",
				path, at, st.Uid, st.Mode&0o7777, errUntrusted)
		}
	}
	return os.NewFile(uintptr(fd), abs), nil
}

// resolveParent resolves the symbolic links in dir, the state directory's
// parent, as far as it exists; each link on the way must belong to root or
// the trusted user.
func (s *store) resolveParent(dir string) (string, error) {
	existing, rest := dir, ""
	for {
		if _, err := os.Lstat(existing); err == nil || existing == "/" {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = filepath.Dir(existing)
	}
	for p := existing; p != "/"; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		if st, ok := fi.Sys().(*unix.Stat_t); ok && fi.Mode()&os.ModeSymlink != 0 && !s.trusted(st.Uid) {
			return "", fmt.Errorf("state directory: %s is a symbolic link of uid %d: refusing to follow it (%w)", p, st.Uid, errUntrusted)
		}
	}
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", err
	}
	return filepath.Join(resolved, rest), nil
}

// lock takes an exclusive (or shared) flock on the directory, waiting for
// another lvsprep to finish; the lock goes with the file descriptor.
func (s *store) lock(exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := unix.Flock(int(s.dir.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("locking %s: %w", s.path, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("another lvsprep has held the lock on %s for 2 minutes; try again when it has finished", s.path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readFile reads a file of the directory that must be a regular file owned
// by root (or the trusted user) and writable by nobody else. It returns
// os.ErrNotExist when there is none.
func (s *store) readFile(name string) ([]byte, error) {
	if s.dir == nil {
		return nil, os.ErrNotExist
	}
	full := filepath.Join(s.path, name)
	fd, err := unix.Openat(int(s.dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, os.ErrNotExist
	} else if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link: refusing to follow it (%w)", full, errUntrusted)
	} else if err != nil {
		return nil, fmt.Errorf("reading %s: %w", full, err)
	}
	f := os.NewFile(uintptr(fd), full)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("reading %s: %w", full, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, fmt.Errorf("%s is not a regular file (%w)", full, errUntrusted)
	case !s.trusted(st.Uid):
		return nil, fmt.Errorf("%s belongs to uid %d, not root: refusing to act on it (%w)", full, st.Uid, errUntrusted)
	case st.Mode&0o022 != 0:
		return nil, fmt.Errorf("%s is writable by group or others (mode %04o): refusing to act on it (%w)", full, st.Mode&0o7777, errUntrusted)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxStateSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", full, err)
	}
	if len(b) > maxStateSize {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a state file", full, maxStateSize)
	}
	return b, nil
}

// writeFile replaces a file of the directory atomically and durably: a
// temporary file written and synced, renamed over the old one, the directory
// synced.
func (s *store) writeFile(name string, data []byte) error {
	dfd := int(s.dir.Fd())
	var tmp string
	var fd int
	var err error
	for i := 0; ; i++ {
		tmp = fmt.Sprintf(".%s.%d.%d.tmp", name, os.Getpid(), i)
		fd, err = unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if !errors.Is(err, unix.EEXIST) || i > 100 {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Join(s.path, name), err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, name)
	}
	if err == nil {
		err = unix.Fsync(dfd)
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("writing %s: %w", filepath.Join(s.path, name), err)
	}
	return nil
}

func (s *store) removeFile(name string) error {
	if s.dir == nil {
		return nil
	}
	if err := unix.Unlinkat(int(s.dir.Fd()), name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing %s: %w", filepath.Join(s.path, name), err)
	}
	return unix.Fsync(int(s.dir.Fd()))
}

// load reads and checks a state file; it returns nil, nil when there is
// none.
func (s *store) load(key string) (*state, error) {
	b, err := s.readFile(key + ".json")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	st, p, err := decodeState(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", statePath(s.path, key), err)
	}
	if p.Key != key {
		return nil, fmt.Errorf("%s: records %s, whose state file is %s.json (%w)", statePath(s.path, key), p.describe(), p.Key, errUntrusted)
	}
	return st, nil
}

// save writes the state file atomically and durably.
func (s *store) save(key string, st *state) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return s.writeFile(key+".json", append(b, '\n'))
}

func (s *store) remove(key string) error { return s.removeFile(key + ".json") }

// keys lists the keys of the state files, sorted.
func (s *store) keys() ([]string, error) {
	if s.dir == nil {
		return nil, nil
	}
	fd, err := unix.Openat(int(s.dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reading state directory %s: %w", s.path, err)
	}
	d := os.NewFile(uintptr(fd), s.path)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("reading state directory %s: %w", s.path, err)
	}
	var keys []string
	for _, n := range names {
		if strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") {
			keys = append(keys, strings.TrimSuffix(n, ".json"))
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// decodeState parses a state file and checks that it describes what
// lvsprep itself would have written: a known profile whose flags rebuild
// it, and records only of that profile's steps, with values that are safe
// to put back. A state file is an instruction to root; anything else in it
// is refused.
func decodeState(b []byte) (*state, profile, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var st state
	if err := dec.Decode(&st); err != nil {
		return nil, profile{}, fmt.Errorf("not a state file: %w", err)
	}
	if dec.More() {
		return nil, profile{}, errors.New("not a state file: data after the JSON object")
	}
	p, err := rebuildProfile(st.Profile, st.Args)
	if err != nil {
		return nil, profile{}, fmt.Errorf("profile %q %q: %w (%w)", st.Profile, st.Args, err, errUntrusted)
	}
	seen := map[string]bool{}
	for _, rec := range st.Records {
		if err := checkRecord(p, rec); err != nil {
			return nil, profile{}, fmt.Errorf("record %s: %w (%w)", rec.Key(), err, errUntrusted)
		}
		if seen[rec.Key()] {
			return nil, profile{}, fmt.Errorf("record %s appears twice (%w)", rec.Key(), errUntrusted)
		}
		seen[rec.Key()] = true
	}
	return &st, p, nil
}

// checkRecord accepts a record only for a step of the profile, with a
// prior value that can be written back.
func checkRecord(p profile, rec record) error {
	i := slices.IndexFunc(p.Steps, func(s step) bool { return sameStep(s, rec.step) })
	if i < 0 {
		return fmt.Errorf("not a step of %s", p.describe())
	}
	if !rec.Changed && (rec.Prior != "" || len(rec.PriorRoutes) > 0 || rec.Pending) {
		return errors.New("an unchanged setting with a prior value")
	}
	if rec.Kind == kindSysctl && rec.Changed {
		if rec.Prior == "" || len(rec.Prior) > 256 || strings.ContainsFunc(rec.Prior, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			return fmt.Errorf("prior value %q is not a sysctl value", rec.Prior)
		}
	}
	if rec.Kind != kindSysctl && rec.Prior != "" {
		return errors.New("a prior value on a setting that has none")
	}
	if rec.Kind != kindRoute && len(rec.PriorRoutes) > 0 {
		return errors.New("prior routes on a setting that is not a route")
	}
	for _, r := range rec.PriorRoutes {
		if r.Family() != rec.Route.Family() || (r.Dev != "" && checkDev("dev", r.Dev, false) != nil) ||
			r.Metric < 0 || r.Protocol < 0 || r.Protocol > 255 || (!r.Gateway.IsValid() && r.Dev == "") {
			return fmt.Errorf("prior route %s is not a default route of this family", r)
		}
	}
	return nil
}

// sameStep compares what two steps change (their explanations may differ
// between versions).
func sameStep(a, b step) bool {
	a.Why, b.Why = "", ""
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
