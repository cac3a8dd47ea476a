package ipvsadm_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/names"
	"golang.org/x/sys/unix"
)

// The test binary doubles as an ipvsadm executable for the golden replay:
// run with helperEnv set, it behaves like cmd/ipvsadm over a fake kernel
// whose state lives in a log of the changes it accepted.
const (
	helperEnv      = "LVSKIT_IPVSADM_HELPER" // path of the change log
	helperIfaces   = "LVSKIT_IPVSADM_IFACES" // comma-separated interfaces
	helperNonRoot  = "LVSKIT_IPVSADM_NONROOT"
	helperArgv0    = "LVSKIT_IPVSADM_ARGV0" // program name to use instead of argv[0]
	helperGolden   = "LVSKIT_IPVSADM_GOLDEN"
	helperConnFile = "LVSKIT_IPVSADM_CONNFILE"
	helperServices = "LVSKIT_IPVSADM_SERVICES"
	helperEngine   = "LVSKIT_IPVSADM_ENGINE" // "sequential" for ipvsadm.RestoreSequential
)

func resolverFrom(golden, services string) *names.Resolver {
	return names.NewResolverFiles(filepath.Join(golden, "hosts"), services, "")
}

func TestMain(m *testing.M) {
	if log := os.Getenv(helperEnv); log != "" {
		os.Exit(helperMain(log))
	}
	os.Exit(m.Run())
}

// helperMain is one ipvsadm process of a replay.
func helperMain(logPath string) int {
	var opts []ipvstest.Option
	if ifs := os.Getenv(helperIfaces); ifs != "" {
		opts = append(opts, ipvstest.WithInterfaces(strings.Split(ifs, ",")...))
	}
	f := ipvstest.New(opts...)
	if err := replayLog(f, logPath); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 99
	}
	rec := &recorder{Fake: f, path: logPath}
	args := append([]string(nil), os.Args...)
	if a := os.Getenv(helperArgv0); a != "" {
		args[0] = a
	}
	_, posix := os.LookupEnv("POSIXLY_CORRECT")
	// The restore engine cmd/ipvsadm ships, unless told otherwise.
	var engine ipvsadm.RestoreEngine = ipvsadm.Pipelined(ipvsadm.DefaultWindow)
	if os.Getenv(helperEngine) == "sequential" {
		engine = ipvsadm.RestoreSequential
	}
	env := ipvsadm.Env{
		Open: func() (ipvs.Client, error) {
			if os.Getenv(helperNonRoot) != "" {
				// What GET_INFO answers a process without CAP_NET_ADMIN.
				return nil, &ipvs.OpError{Op: ipvs.CmdGetInfo, Err: unix.EPERM}
			}
			return rec, nil
		},
		Modprobe:      func() error { return nil },
		Resolver:      resolverFrom(os.Getenv(helperGolden), os.Getenv(helperServices)),
		ConnFile:      os.Getenv(helperConnFile),
		Posix:         posix,
		RestoreEngine: engine,
	}
	status := ipvsadm.Main(args, os.Stdin, os.Stdout, os.Stderr, env)
	if status == ipvsadm.StatusCrash {
		dieOfSegfault()
	}
	return status
}

// dieOfSegfault is cmd/ipvsadm's crash: restore SIGSEGV's default action
// and raise it.
func dieOfSegfault() {
	var act [4]uint64
	unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGSEGV), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	unix.Tgkill(unix.Getpid(), unix.Gettid(), unix.SIGSEGV)
}

// replayLog re-applies every change a previous process recorded.
func replayLog(f *ipvstest.Fake, path string) error {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var req ipvs.Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return err
		}
		if err := f.Exec(req); err != nil {
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
	line, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	fh, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		panic(err)
	}
	defer fh.Close()
	fh.Write(append(line, '\n'))
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
