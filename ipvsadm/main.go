// Package ipvsadm is a drop-in reimplementation of ipvsadm 1.31.
//
// It behaves as Debian 12 ships it: the same command line, the same output
// on stdout and stderr byte for byte, the same exit statuses.
//
// Package ipvsadm/cmdline parses the command line (with the help and
// version text, and the Kind that decides exit statuses). Here: execution
// through an ipvs.Client with ipvsadm's errno messages (execute.go,
// errno.go); the restore command's line reader (restore.go) and its
// pipelined engine (pipelined.go); Main, which opens the kernel interface
// first and buffers stdout as the C library does (main.go).
//
// Listings are written by package ipvsadm/list and -S by package save.
package ipvsadm

import (
	"bufio"
	"fmt"
	"io"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/cmdline"
	"github.com/lvskit/lvskit/names"
)

// defaultConnFile is where the kernel shows the connection table.
const defaultConnFile = "/proc/net/ip_vs_conn"

// minimumIPVSVersion is the oldest kernel IPVS ipvsadm 1.31 accepts
// silently (1.1.4).
const minimumIPVSVersion = 0x010104

// stdoutBufferSize mimics the C library's buffer for a stdout that is a
// pipe or file: output is held back until this much accumulates or the
// program exits, so messages on stderr can come before earlier listing
// text, and a crash loses what was still held.
const stdoutBufferSize = 4096

// Env is what Main needs from the outside world.
type Env struct {
	// Open connects to the kernel's IPVS (ipvs.Open in the real command, a
	// fake in tests).
	Open func() (ipvs.Client, error)
	// Modprobe loads the ip_vs module (the real command runs
	// "/sbin/modprobe -- ip_vs" with its output going to the terminal). It
	// returns nil if the module loader succeeded. nil means no loader.
	Modprobe func() error
	// Resolver answers host and service name questions; nil means the
	// system's (names.NewResolver).
	Resolver *names.Resolver
	// ConnFile is the connection table file; empty means
	// /proc/net/ip_vs_conn (defaultConnFile).
	ConnFile string
	// Posix is popt's POSIXLY_CORRECT mode: set it when POSIXLY_CORRECT or
	// POSIX_ME_HARDER is present in the environment (even if empty).
	Posix bool
	// RestoreEngine runs -R; nil means RestoreSequential.
	RestoreEngine RestoreEngine
	// StdoutIsTerminal makes stdout unbuffered: the C library writes a
	// terminal line by line, so listing text and messages on stderr
	// appear in the order they are produced.
	StdoutIsTerminal bool
}

// Program is one running ipvsadm: its kernel connection and streams. The
// restore engines use it to run lines.
type Program struct {
	Client ipvs.Client
	// Info is what the kernel reported at start-up (the listing header).
	Info   ipvs.Info
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Resolver answers name questions; nil means the system's.
	Resolver *names.Resolver
	// ConnFile is read by -L -c.
	ConnFile string
	// Posix is popt's POSIXLY_CORRECT mode (see Env).
	Posix bool
	// RestoreEngine runs -R; nil means RestoreSequential.
	RestoreEngine RestoreEngine

	restoring bool
}

// resolver returns the program's name resolver, the system's files when
// none was given.
func (p *Program) resolver() *names.Resolver {
	if p.Resolver == nil {
		p.Resolver = names.NewResolver()
	}
	return p.Resolver
}

// Parse checks one command line with the program's resolver and popt mode
// (see cmdline.Parser.Parse).
func (p *Program) Parse(argv []string) (*cmdline.Invocation, *cmdline.Outcome) {
	parser := cmdline.Parser{Resolver: p.resolver(), Posix: p.Posix}
	return parser.Parse(argv)
}

// RunLine parses and executes one command line (argv[0] = program name),
// prints its messages and returns its outcome (with the texts already
// printed).
func (p *Program) RunLine(argv []string) cmdline.Outcome {
	inv, o := p.Parse(argv)
	if o == nil {
		r := p.Execute(inv)
		o = &r
	}
	p.Print(*o)
	return *o
}

// Print writes an outcome's texts to stdout and stderr.
func (p *Program) Print(o cmdline.Outcome) {
	if o.Stdout != "" {
		io.WriteString(p.Stdout, o.Stdout)
	}
	if o.Stderr != "" {
		io.WriteString(p.Stderr, o.Stderr)
	}
}

// Main runs ipvsadm with the given arguments (args[0] is the program name
// used in messages) and returns the exit status. Like the real program it
// first opens the kernel interface, loading the module once if that fails,
// and only then looks at the arguments, so even -h needs a working IPVS.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, env Env) int {
	client, info, err := initialise(env)
	if err != nil {
		fmt.Fprintf(stderr, "Can't initialize ipvs: %s\nAre you sure that IP Virtual Server is built in the kernel or as module?\n",
			errorText(opGeneric, err))
		return cmdline.InitError.Status()
	}
	defer client.Close()
	if info.Version < minimumIPVSVersion {
		fmt.Fprintf(stderr, "Warning: IPVS version mismatch: \n  Kernel compiled with IPVS version %d.%d.%d\n  ipvsadm v1.31  requires minimum IPVS version 1.1.4\n\n",
			info.Version>>16&0xff, info.Version>>8&0xff, info.Version&0xff)
	}

	out := bufio.NewWriterSize(stdout, stdoutBufferSize)
	var progOut io.Writer = out
	if env.StdoutIsTerminal {
		progOut = stdout
	}
	p := &Program{
		Client:        client,
		Info:          info,
		Stdin:         stdin,
		Stdout:        progOut,
		Stderr:        stderr,
		Resolver:      env.Resolver,
		ConnFile:      env.ConnFile,
		Posix:         env.Posix,
		RestoreEngine: env.RestoreEngine,
	}
	if p.ConnFile == "" {
		p.ConnFile = defaultConnFile
	}
	var o cmdline.Outcome
	if len(args) <= 1 {
		o = p.listAll(listDefaults(p))
		p.Print(o)
	} else {
		o = p.RunLine(args)
	}
	if o.Kind == cmdline.Crash {
		// The real program dies with its stdout buffer unwritten.
		return o.Status()
	}
	out.Flush()
	return o.Status()
}

// initialise opens the kernel interface and reads the IPVS info; on failure
// it runs the module loader once and tries again, as ipvsadm does. The
// error reported is the second attempt's, or the first one's if the loader
// failed.
func initialise(env Env) (ipvs.Client, ipvs.Info, error) {
	client, info, err := openAndInfo(env)
	if err == nil {
		return client, info, nil
	}
	if env.Modprobe == nil || env.Modprobe() != nil {
		return nil, ipvs.Info{}, err
	}
	return openAndInfo(env)
}

func openAndInfo(env Env) (ipvs.Client, ipvs.Info, error) {
	client, err := env.Open()
	if err != nil {
		return nil, ipvs.Info{}, err
	}
	info, err := client.Info()
	if err != nil {
		client.Close()
		return nil, ipvs.Info{}, err
	}
	return client, info, nil
}
