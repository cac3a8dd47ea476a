package lvsctl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/lvskit/lvskit/lvsctl/top"
)

// Every command's flags are checked here, by kong's Validate hook, while
// the command line is parsed: a bad value is a usage error (exit 2) before
// the command reads the kernel or changes anything.

// flagError is a flag's bad value; its text names the flag.
type flagError struct{ flag, msg string }

func (e *flagError) Error() string { return e.flag + ": " + e.msg }

func flagErrorf(flag, format string, args ...any) error {
	return &flagError{flag: flag, msg: fmt.Sprintf(format, args...)}
}

// lookupHost resolves a listen address's host name (tests replace it).
var lookupHost = net.DefaultResolver.LookupHost

// resolveTimeout bounds the lookup of a listen address's name.
const resolveTimeout = 10 * time.Second

func (c *planCmd) Validate() error  { return c.planFlags.validate() }
func (c *applyCmd) Validate() error { return c.planFlags.validate() }

func (f *planFlags) validate() error {
	if err := checkDuration("--drain-timeout", f.DrainTimeout); err != nil {
		return err
	}
	if f.MaxDelete < 0 || f.MaxDelete > 100 {
		return flagErrorf("--max-delete", "%d is not a percentage from 0 to 100", f.MaxDelete)
	}
	return f.journalFlag.validate()
}

func (c *statusCmd) Validate() error { return c.journalFlag.validate() }

func (c *runCmd) Validate() error {
	if err := checkDuration("--drain-timeout", c.DrainTimeout); err != nil {
		return err
	}
	if c.Checks != "" {
		if err := checkReadable("--checks", c.Checks); err != nil {
			return err
		}
	}
	if c.MetricsListen != "" {
		if err := checkListen("--metrics-listen", c.MetricsListen); err != nil {
			return err
		}
	}
	return c.journalFlag.validate()
}

func (c *topCmd) Validate() error {
	if _, err := top.ParseColumn(c.Sort); err != nil {
		return &flagError{flag: "--sort", msg: err.Error()}
	}
	// --delay and --iterations check their values as they read them.
	return c.journalFlag.validate()
}

// validate accepts a journal directory that does not exist yet (the
// journal makes it) or is a directory.
func (j *journalFlag) validate() error {
	if j.JournalDir == "" {
		return nil
	}
	st, err := os.Stat(j.JournalDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return flagErrorf("--journal-dir", "%v", err)
	case !st.IsDir():
		return flagErrorf("--journal-dir", "%s is not a directory", j.JournalDir)
	}
	return nil
}

func checkDuration(flag string, d time.Duration) error {
	if d < 0 {
		return flagErrorf(flag, "%s is negative", shortDuration(d))
	}
	return nil
}

// checkReadable accepts a regular file that can be opened for reading.
func checkReadable(flag, name string) error {
	f, err := os.Open(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return flagErrorf(flag, "%s: %v", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return flagErrorf(flag, "%s: %v", name, err)
	}
	if st.IsDir() {
		return flagErrorf(flag, "%s is a directory, not a file", name)
	}
	return nil
}

// checkListen accepts HOST:PORT where PORT is 0 to 65535 or a service
// name and HOST is empty (every address), an IP address or a name that
// resolves; then it listens there once, so that an address of another
// host or a port in use is refused now, not after run changed the table.
func checkListen(flag, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return flagErrorf(flag, "%q is not HOST:PORT (e.g. 127.0.0.1:9117, [::1]:9117 or :9117)", addr)
	}
	if port == "" {
		return flagErrorf(flag, "%q has no port", addr)
	}
	if n, err := strconv.Atoi(port); err == nil {
		if n < 0 || n > 65535 {
			return flagErrorf(flag, "port %d is out of range 0-65535", n)
		}
	} else if _, err := net.LookupPort("tcp", port); err != nil {
		return flagErrorf(flag, "%q is not a port number or a known service", port)
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
			defer cancel()
			if _, err := lookupHost(ctx, host); err != nil {
				var de *net.DNSError
				if errors.As(err, &de) && de.Err != "" {
					err = errors.New(de.Err)
				}
				return flagErrorf(flag, "%s does not resolve: %v", host, err)
			}
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			err = oe.Err
		}
		return flagErrorf(flag, "cannot listen on %s: %v", addr, err)
	}
	return ln.Close()
}
