package ipvsadm_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/internal/sysenv"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/ipvsadm/cmdline"
	"github.com/lvskit/lvskit/ipvsadm/list/listtest"
	"github.com/lvskit/lvskit/names"
)

// The test binary doubles as the ipvsadm of the transcript scripts
// (testscript.Main runs it under that name): each process behaves like
// cmd/ipvsadm over a fake kernel, rebuilt from the files in the script's
// fake directory, so the table carries from one command to the next as it
// did in the recording VM.
//
// The fake directory holds:
//
//	log    the changes the fake accepted, one logEntry a line
//	order  a recorded listing whose service order the fake dumps in
//	conns  what the fake's /proc/net/ip_vs_conn holds
const (
	fakeDirEnv  = "LVSKIT_FAKE_DIR"
	ifacesEnv   = "LVSKIT_FAKE_IFACES"  // comma-separated interfaces
	nonRootEnv  = "LVSKIT_FAKE_NONROOT" // set by the su stand-in
	argv0Env    = "LVSKIT_IPVSADM_ARGV0"
	hostsEnv    = "LVSKIT_FAKE_HOSTS"    // the recording VM's /etc/hosts
	servicesEnv = "LVSKIT_FAKE_SERVICES" // its /etc/services
	engineEnv   = "LVSKIT_IPVSADM_ENGINE"
)

// ipvsadmMain is one ipvsadm process of a script.
func ipvsadmMain() int {
	dir := os.Getenv(fakeDirEnv)
	var opts []ipvstest.Option
	if ifs := os.Getenv(ifacesEnv); ifs != "" {
		opts = append(opts, ipvstest.WithInterfaces(strings.Split(ifs, ",")...))
	}
	f := ipvstest.New(opts...)
	if err := loadFake(f, dir); err != nil {
		fmt.Fprintln(os.Stderr, "fake kernel:", err)
		return 99
	}
	rec := &recorder{Fake: f, path: filepath.Join(dir, "log")}
	args := append([]string(nil), os.Args...)
	if a := os.Getenv(argv0Env); a != "" {
		args[0] = a
	}
	_, posix := os.LookupEnv("POSIXLY_CORRECT")
	// The restore engine cmd/ipvsadm ships, unless told otherwise.
	var engine ipvsadm.RestoreEngine = ipvsadm.Pipelined(ipvsadm.DefaultWindow)
	if os.Getenv(engineEnv) == "sequential" {
		engine = ipvsadm.RestoreSequential
	}
	env := ipvsadm.Env{
		Open: func() (ipvs.Client, error) {
			if os.Getenv(nonRootEnv) != "" {
				// What GET_INFO answers a process without CAP_NET_ADMIN.
				return nil, &ipvs.OpError{Op: ipvs.CmdGetInfo, Err: unix.EPERM}
			}
			return rec, nil
		},
		Modprobe:      func() error { return nil },
		Resolver:      names.NewResolverFiles(os.Getenv(hostsEnv), os.Getenv(servicesEnv), ""),
		ConnFile:      filepath.Join(dir, "conns"),
		Posix:         posix,
		RestoreEngine: engine,
	}
	status := ipvsadm.Main(args, os.Stdin, os.Stdout, os.Stderr, env)
	if status == cmdline.StatusCrash {
		sysenv.DieOfSegfault()
	}
	return status
}

// loadFake rebuilds the fake from dir: the logged changes, then the dump
// order.
func loadFake(f *ipvstest.Fake, dir string) error {
	if err := replayLog(f, filepath.Join(dir, "log")); err != nil {
		return err
	}
	paths, err := lines(filepath.Join(dir, "order"))
	if err != nil || len(paths) == 0 {
		return err
	}
	tab, err := readListings(paths...)
	if err != nil {
		return err
	}
	keys := make([]ipvs.Service, len(tab.Services))
	for i, e := range tab.Services {
		keys[i] = e.Svc
	}
	return f.SetServiceOrder(keys)
}

// lines returns the lines of a file that may not exist.
func lines(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for l := range strings.Lines(string(data)) {
		if l = strings.TrimSuffix(l, "\n"); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

// readListings reads the table recorded listings show.
func readListings(paths ...string) (*listtest.Table, error) {
	tab := listtest.New()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if err := tab.Add(string(data)); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(p), err)
		}
	}
	return tab, nil
}

// setCounters gives the fake's services and destinations the counters
// tab shows.
func setCounters(f *ipvstest.Fake, tab *listtest.Table) error {
	for _, e := range tab.Services {
		if err := f.SetServiceStats(e.Svc, e.Stats); err != nil {
			return fmt.Errorf("counters of %v: %w", e.Svc, err)
		}
		for _, d := range e.Dests {
			if err := f.SetDestinationCounters(e.Svc, d.Destination, d.DestCounters); err != nil {
				return fmt.Errorf("counters of %v: %w", d.Destination, err)
			}
		}
	}
	return nil
}

// logEntry is a change the fake accepted, or, with Counters, the recorded
// listings whose counters it was given at that point.
type logEntry struct {
	ipvs.Request
	Counters []string `json:",omitempty"`
}

// replayLog re-applies every change a previous process recorded.
func replayLog(f *ipvstest.Fake, path string) error {
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e logEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return err
		}
		if len(e.Counters) > 0 {
			tab, err := readListings(e.Counters...)
			if err == nil {
				err = setCounters(f, tab)
			}
			if err != nil {
				return err
			}
			continue
		}
		if err := f.Exec(e.Request); err != nil {
			return fmt.Errorf("replaying %s: %v", sc.Text(), err)
		}
	}
	return sc.Err()
}

// recorder is the fake as a client that logs each accepted change.
type recorder struct {
	*ipvstest.Fake
	path string
}

func (r *recorder) Close() error { return nil }

func (r *recorder) Exec(req ipvs.Request) error {
	err := r.Fake.Exec(req)
	if err == nil {
		r.record(req)
	}
	return err
}

func (r *recorder) Pipeline(window int) ipvs.Pipeline {
	return &recordingPipeline{r: r, p: r.Fake.Pipeline(window)}
}

func (r *recorder) record(req ipvs.Request) {
	appendLog(r.path, logEntry{Request: req})
}

// appendLog adds e to the log at path.
func appendLog(path string, e logEntry) {
	line, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		panic(err)
	}
	defer fh.Close()
	if _, err := fh.Write(append(line, '\n')); err != nil {
		panic(err)
	}
}

type recordingPipeline struct {
	r *recorder
	p ipvs.Pipeline
}

func (rp *recordingPipeline) Submit(req ipvs.Request, done func(error)) error {
	return rp.p.Submit(req, func(err error) {
		if err == nil {
			rp.r.record(req)
		}
		if done != nil {
			done(err)
		}
	})
}

func (rp *recordingPipeline) Flush() error { return rp.p.Flush() }
