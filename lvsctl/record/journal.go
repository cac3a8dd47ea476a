// Package record keeps what lvsctl leaves on disk for the next command.
//
// That is the drain journal and lvsctl run's record. Both live in one
// directory per network namespace, which only its owner may use.
package record

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/internal/netnsid"
	"github.com/lvskit/lvskit/rules"
)

// DefaultRoot holds one journal directory per network namespace. /run is
// emptied at boot, as are the kernel's IPVS tables: a journal never
// outlives the table it describes.
const DefaultRoot = "/run/lvsctl"

// JournalName is the journal of drains in the journal directory.
const JournalName = "journal.json"

// journalFile is the journal as stored: the engine's record plus where it
// belongs: the boot, the namespace's inode and its cookie (SO_NETNS_COOKIE,
// never reused while the system runs; inodes are).
type journalFile struct {
	rules.Journal
	netnsid.Identity
}

// Journal is the journal of one namespace: a directory made and
// checked by lvsctl (owned by us, mode 0700, not a symbolic link), held
// open and locked while an apply runs, and a file replaced atomically
// (temporary file, fsync, rename, fsync of the directory).
type Journal struct {
	dir string
	fd  int // the directory, opened without following links
	id  netnsid.Identity
}

// ErrLocked: another lvsctl apply or run holds the journal directory.
var ErrLocked = errors.New("another lvsctl apply or run holds the journal directory")

// ErrNoJournal: the journal directory does not exist (nothing was ever
// journaled in this namespace since boot); only readers see it.
var ErrNoJournal = errors.New("no journal directory")

// Open opens the journal directory dir below root. An apply (lock)
// creates it and its parent with mode 0700 when missing and takes the
// directory's exclusive lock, so that two applies never drain at once;
// readers (plan, status) change nothing and get ErrNoJournal when it is
// missing.
func Open(root, dir string, lock bool) (*Journal, error) {
	if !lock {
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			return nil, ErrNoJournal
		}
	}
	for _, d := range []string{root, dir} {
		if !lock {
			break
		}
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("journal directory: %w", err)
		}
	}
	// Each directory from the root down must be ours and closed to others.
	if dir != root {
		if err := checkDir(root); err != nil {
			return nil, err
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("journal directory %s: %w", dir, err)
	}
	if err := checkFd(fd, dir, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if lock {
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(fd)
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
			}
			return nil, fmt.Errorf("locking %s: %w", dir, err)
		}
	}
	// What cannot be read stays zero (a cookie, on a kernel without
	// one): the rest still tells namespaces apart.
	id, _ := netnsid.Current()
	return &Journal{dir: dir, fd: fd, id: id}, nil
}

func checkDir(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("journal directory %s: %w", path, err)
	}
	defer unix.Close(fd)
	return checkFd(fd, path, true)
}

// checkFd refuses what another user could have made or changed: an owner
// other than us, or write access for group or others (for a directory,
// any access).
func checkFd(fd int, path string, dir bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	mask := uint32(0o022)
	kind := uint32(unix.S_IFREG)
	if dir {
		mask, kind = 0o077, unix.S_IFDIR
	}
	switch {
	case uint32(st.Mode)&unix.S_IFMT != kind:
		return fmt.Errorf("%s: not a %s; refusing to use it", path, map[bool]string{true: "directory", false: "regular file"}[dir])
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s: owned by uid %d, not by us (uid %d); refusing to use it", path, st.Uid, os.Geteuid())
	case uint32(st.Mode)&mask != 0:
		return fmt.Errorf("%s: mode %04o lets others in; refusing to use it", path, st.Mode&0o7777)
	}
	return nil
}

func (j *Journal) Close() error { return unix.Close(j.fd) }

// Load reads the journal; nil when there is none, or when it was written in
// another boot or namespace.
func (j *Journal) Load() (*rules.Journal, error) {
	var jf journalFile
	if ok, err := j.readFile(JournalName, &jf); !ok || err != nil {
		return nil, err
	}
	if jf.Version != rules.JournalVersion {
		return nil, fmt.Errorf("journal %s: version %d, this lvsctl knows %d", filepath.Join(j.dir, JournalName), jf.Version, rules.JournalVersion)
	}
	if !j.id.Same(jf.Identity) {
		return nil, nil // another boot's or namespace's: its table is gone
	}
	return &jf.Journal, nil
}

// Save replaces the journal atomically; nil removes it.
func (j *Journal) Save(jr *rules.Journal) error {
	if jr == nil {
		return j.writeFile(JournalName, nil)
	}
	return j.writeFile(JournalName, journalFile{Journal: *jr, Identity: j.id})
}

// readFile decodes the directory's file name into v; false when there is
// no such file. The file must be ours and closed to others, and is opened
// without following a link.
func (j *Journal) readFile(name string, v any) (bool, error) {
	path := filepath.Join(j.dir, name)
	fd, err := unix.Openat(j.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := checkFd(fd, path, false); err != nil {
		return false, err
	}
	if err := json.NewDecoder(f).Decode(v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

// writeFile replaces the directory's file name atomically (temporary file,
// fsync, rename, fsync of the directory) with v as JSON; nil removes it.
// A v with a writeJSON method writes itself.
func (j *Journal) writeFile(name string, v any) error {
	if v == nil {
		err := unix.Unlinkat(j.fd, name, 0)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("removing %s: %w", filepath.Join(j.dir, name), err)
		}
		return unix.Fsync(j.fd)
	}
	tmp := "." + name + "." + strconv.Itoa(os.Getpid()) + ".tmp"
	fd, err := unix.Openat(j.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EEXIST) {
		// Left by a killed run of ours with the same pid: ours to replace.
		unix.Unlinkat(j.fd, tmp, 0)
		fd, err = unix.Openat(j.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	w := bufio.NewWriterSize(f, 64<<10)
	if s, ok := v.(interface{ writeJSON(io.Writer) error }); ok {
		err = s.writeJSON(w)
	} else {
		err = json.NewEncoder(w).Encode(v)
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(j.fd, tmp, j.fd, name)
	}
	if err == nil {
		err = unix.Fsync(j.fd)
	}
	if err != nil {
		unix.Unlinkat(j.fd, tmp, 0)
		return fmt.Errorf("writing %s in %s: %w", name, j.dir, err)
	}
	return nil
}
