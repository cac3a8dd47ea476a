package vm

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// Entry is one file of an initramfs image, by its path inside the guest.
// Exactly one of Data, HostPath and Link describes a file's content; Dir
// entries have none; Dev entries are character devices.
type Entry struct {
	Path     string // absolute guest path, e.g. /usr/sbin/ipvsadm
	Mode     fs.FileMode
	Data     []byte
	HostPath string // copied (symlinks followed)
	Link     string // symlink target
	Dir      bool
	Dev      [2]uint32 // major, minor of a character device
	IsDev    bool
}

// newc header fields, from the kernel's Documentation/driver-api/early-userspace.
const (
	cpioDir     = 0o040000
	cpioFile    = 0o100000
	cpioLink    = 0o120000
	cpioCharDev = 0o020000
)

// cpioWriter writes the "newc" cpio format the kernel unpacks, creating
// parent directories before their contents.
type cpioWriter struct {
	w    io.Writer
	n    int64
	ino  uint32
	dirs map[string]bool
}

func newCpioWriter(w io.Writer) *cpioWriter {
	return &cpioWriter{w: w, ino: 1, dirs: map[string]bool{"": true, "/": true}}
}

func (c *cpioWriter) write(p []byte) error {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return err
}

func (c *cpioWriter) pad() error {
	if r := c.n % 4; r != 0 {
		return c.write(make([]byte, 4-r))
	}
	return nil
}

func (c *cpioWriter) header(name string, mode uint32, size int64, major, minor uint32) error {
	c.ino++
	nlink := 1
	if mode&0o170000 == cpioDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, major, minor, len(name)+1, 0)
	if err := c.write([]byte(hdr + name + "\x00")); err != nil {
		return err
	}
	return c.pad()
}

// parents writes directory entries for the missing ancestors of p.
func (c *cpioWriter) parents(p string) error {
	dir := path.Dir(p)
	if c.dirs[dir] {
		return nil
	}
	if err := c.parents(dir); err != nil {
		return err
	}
	c.dirs[dir] = true
	return c.header(strings.TrimPrefix(dir, "/"), cpioDir|0o755, 0, 0, 0)
}

// add writes one entry.
func (c *cpioWriter) add(e Entry) error {
	p := path.Clean(e.Path)
	if !path.IsAbs(p) || p == "/" {
		return fmt.Errorf("cpio: bad guest path %q", e.Path)
	}
	if err := c.parents(p); err != nil {
		return err
	}
	name := strings.TrimPrefix(p, "/")
	perm := uint32(e.Mode.Perm())
	switch {
	case e.Dir:
		if c.dirs[p] {
			return nil
		}
		c.dirs[p] = true
		if perm == 0 {
			perm = 0o755
		}
		if e.Mode&fs.ModeSticky != 0 {
			perm |= 0o1000
		}
		return c.header(name, cpioDir|perm, 0, 0, 0)
	case e.Link != "":
		if err := c.header(name, cpioLink|0o777, int64(len(e.Link)), 0, 0); err != nil {
			return err
		}
		if err := c.write([]byte(e.Link)); err != nil {
			return err
		}
		return c.pad()
	case e.IsDev:
		if perm == 0 {
			perm = 0o600
		}
		return c.header(name, cpioCharDev|perm, 0, e.Dev[0], e.Dev[1])
	case e.HostPath != "":
		f, err := os.Open(e.HostPath)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if perm == 0 {
			perm = uint32(st.Mode().Perm())
		}
		if err := c.header(name, cpioFile|perm, st.Size(), 0, 0); err != nil {
			return err
		}
		n, err := io.Copy(c.w, f)
		c.n += n
		if err != nil {
			return err
		}
		if n != st.Size() {
			return fmt.Errorf("cpio: %s changed size while copying", e.HostPath)
		}
		return c.pad()
	default:
		if perm == 0 {
			perm = 0o644
		}
		if err := c.header(name, cpioFile|perm, int64(len(e.Data)), 0, 0); err != nil {
			return err
		}
		if err := c.write(e.Data); err != nil {
			return err
		}
		return c.pad()
	}
}

// close writes the archive trailer.
func (c *cpioWriter) close() error {
	if err := c.header("TRAILER!!!", 0, 0, 0, 0); err != nil {
		return err
	}
	return c.pad()
}

// writeCpio writes entries (sorted by path, directories first by virtue of
// sorting) as one newc archive.
func writeCpio(w io.Writer, entries []Entry) (int64, error) {
	sorted := append([]Entry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	c := newCpioWriter(w)
	for _, e := range sorted {
		if err := c.add(e); err != nil {
			return c.n, err
		}
	}
	err := c.close()
	return c.n, err
}
