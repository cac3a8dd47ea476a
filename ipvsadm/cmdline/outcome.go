package cmdline

// Kind says how one ipvsadm command line ended. Everything about the exit
// status and about whether a restore goes on after the line follows from
// the kind, in Status and Terminates below: this is the one place where
// ipvsadm's exit statuses are decided.
type Kind int

// The ways a command line can end.
const (
	// Success: the command did what it was asked (silent, or it printed a
	// listing).
	Success Kind = iota
	// Informational: -h or -v printed usage or the version.
	Informational
	// TryHelp: the first option was missing or not a command, or -R was met
	// while restoring; ipvsadm printed "Try `... -h' ...".
	TryHelp
	// PoptError: popt rejected a word after the first option ("unknown
	// option", "missing argument", "option does not take an argument").
	PoptError
	// Invalid: ipvsadm's own validation failed (its fail() function).
	Invalid
	// KernelError: the kernel refused a change.
	KernelError
	// ListError: a listing could not be produced (kernel refusal while
	// reading, /proc/net/ip_vs_conn unreadable, timeouts/daemons unreadable).
	ListError
	// Crash: the input makes the real ipvsadm die of SIGSEGV (-b ",").
	Crash
	// InitError: the kernel interface could not be opened.
	InitError
)

// StatusCrash is the status a shell reports for a process killed by
// SIGSEGV. ipvsadm.Main returns it for Crash; cmd/ipvsadm turns it into a
// real SIGSEGV so that shells print what they print for the real binary.
const StatusCrash = 128 + 11

// Status is the process exit status for a line that ended this way.
func (k Kind) Status() int {
	switch k {
	case Success, Informational:
		return 0
	case ListError:
		return 1
	case Invalid, InitError:
		return 2
	case Crash:
		return StatusCrash
	default: // TryHelp, PoptError, KernelError: ipvsadm returns -1
		return 255
	}
}

// Terminates reports whether the real ipvsadm calls exit() for this kind,
// which ends a restore (-R) right there. Popt errors and kernel errors only
// make the line's status -1; the restore goes on with the next line.
func (k Kind) Terminates() bool {
	switch k {
	case Success, PoptError, KernelError:
		return false
	}
	return true
}

// Outcome is the result of parsing or running one command line: its kind
// and the text still to be printed (usage/version on stdout, a diagnostic
// on stderr, each complete with its final newline).
type Outcome struct {
	Kind   Kind
	Stdout string
	Stderr string
}

// Status is the exit status for the outcome.
func (o Outcome) Status() int { return o.Kind.Status() }

// Terminates reports whether a restore stops after this outcome.
func (o Outcome) Terminates() bool { return o.Kind.Terminates() }

func invalid(msg string) *Outcome { return &Outcome{Kind: Invalid, Stderr: msg + "\n"} }
