package rules

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"syscall"

	"github.com/lvskit/lvskit/ipvsadm"
)

// The wrapper scripts call ipvsadm through PATH, so its messages name it
// "ipvsadm" whatever the wrapper was invoked as.
const ipvsadmName = "ipvsadm"

// SaveScript behaves like Debian's ipvsadm-save script (args[0] is the
// name it was invoked as): every argument is looked at; "-n" asks for
// numeric output, any other argument starting with "-" prints the script's
// usage to stderr and exits 1, other arguments are ignored. Then it runs
// "ipvsadm -S [-n]" in-process and returns that run's status.
func SaveScript(args []string, stdout, stderr io.Writer, env ipvsadm.Env) int {
	argv := []string{ipvsadmName, "-S"}
	numeric := false
	for _, a := range args[1:] {
		switch {
		case a == "-n":
			numeric = true
		case strings.HasPrefix(a, "-"):
			io.WriteString(stderr, scriptName(args[0])+": Script to save the IPVS table to stdout.\n"+
				"   With the -n option, prints out the table in numeric format.\n")
			return 1
		}
	}
	if numeric {
		argv = append(argv, "-n")
	}
	return ipvsadm.Main(argv, nil, stdout, stderr, env)
}

// scriptName is what the script's `basename $0` prints in its usage line.
// The unquoted expansion is split into words by the shell and echo joins
// them again with single spaces; only the usual one-word case is
// reproduced with basename's rules (trailing slashes dropped, "/" kept).
func scriptName(arg0 string) string {
	name := strings.TrimRight(arg0, "/")
	if name == "" {
		if arg0 != "" {
			return "/"
		}
		return ""
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// RestoreScript behaves like Debian's ipvsadm-restore script: arguments
// are ignored; all of stdin is read through `grep -v '^#'` (lines starting
// with '#' dropped) into a shell variable, then "ipvsadm -C" flushes the
// table, then `echo "$INPUT" | ipvsadm -R` restores what was read. Both
// ipvsadm runs happen in-process with env; the status is the restore's.
//
// The input is read completely before the flush, as the script does, so
// that `ipvsadm-save | ipvsadm-restore` saves the whole table before it is
// flushed. Like the script's variable, it is held in memory.
func RestoreScript(args []string, stdin io.Reader, stdout, stderr io.Writer, env ipvsadm.Env, getenv func(string) string) int {
	data, err := io.ReadAll(stdin)
	if err != nil {
		// grep reports the error and the script goes on with the lines
		// read before it.
		io.WriteString(stderr, "grep: (standard input): "+errorText(err)+"\n")
	}
	kept, warning := grepComments(data, utf8Locale(getenv))
	io.WriteString(stderr, warning)
	ipvsadm.Main([]string{ipvsadmName, "-C"}, nil, stdout, stderr, env)
	return ipvsadm.Main([]string{ipvsadmName, "-R"}, echo(bytes.TrimRight(kept, "\n")), stdout, stderr, env)
}

// errorText is err as the C library's strerror words it, when err carries
// an errno: Go spells the same texts without the capital letter.
func errorText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		if s != "" {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	return err.Error()
}

// binaryMatches is GNU grep's notice that it suppressed output because the
// input is not text.
const binaryMatches = "grep: (standard input): binary file matches\n"

// grepComments is `grep -v '^#'` on data: the lines not starting with '#',
// each ending in a newline. It reuses data's storage. The second result is
// the notice grep prints on stderr when it takes the input for binary data:
//
//   - a NUL byte: grep prints no line at all (exact when the NUL lies in the
//     first 96 KiB grep reads, the only case reproduced) and gives the
//     notice if some line is selected, counting NUL as a line end too;
//   - in a UTF-8 locale, a line that is not valid UTF-8 for the C library:
//     that line is not printed, the others are, and the notice follows.
func grepComments(data []byte, utf8 bool) (kept []byte, warning string) {
	if bytes.IndexByte(data, 0) >= 0 {
		for rest := data; len(rest) > 0; {
			end := bytes.IndexAny(rest, "\n\x00")
			if end < 0 {
				end = len(rest)
			}
			if end == 0 || rest[0] != '#' {
				return nil, binaryMatches
			}
			rest = rest[min(end+1, len(rest)):]
		}
		return nil, ""
	}
	out := data[:0] // never ahead of the line being read, except the last newline
	for rest := data; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		switch {
		case len(line) > 0 && line[0] == '#':
		case utf8 && !validUTF8(line):
			warning = binaryMatches
		default:
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out, warning
}

// echo is what bash's builtin `echo "$INPUT"` writes: the text and a
// newline, unless the whole text is a valid option word (-n, -e, -E or any
// mix like -nE), which echo takes as options and does not print.
func echo(text []byte) io.Reader {
	if len(text) >= 2 && text[0] == '-' && len(bytes.Trim(text[1:], "neE")) == 0 {
		if bytes.IndexByte(text, 'n') >= 0 {
			return strings.NewReader("")
		}
		return strings.NewReader("\n")
	}
	return io.MultiReader(bytes.NewReader(text), strings.NewReader("\n"))
}

// utf8Locale reports whether the C library's character type locale, as
// LC_ALL, LC_CTYPE and LANG select it, uses UTF-8. (A named locale that is
// not installed would really fall back to "C"; that is not checked.)
func utf8Locale(getenv func(string) string) bool {
	name := ""
	for _, v := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if name = getenv(v); name != "" {
			break
		}
	}
	codeset := name
	if i := strings.IndexByte(codeset, '.'); i >= 0 {
		codeset = codeset[i+1:]
	} else {
		return false
	}
	if i := strings.IndexByte(codeset, '@'); i >= 0 {
		codeset = codeset[:i]
	}
	codeset = strings.ToLower(codeset)
	return codeset == "utf-8" || codeset == "utf8"
}

// validUTF8 is the C library's UTF-8 check: sequences of up to six bytes
// (values up to 0x7fffffff), no overlong forms, no surrogates.
func validUTF8(b []byte) bool {
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			i++
			continue
		}
		var n int
		var v, least uint32
		switch {
		case c >= 0xc2 && c <= 0xdf:
			n, v, least = 2, uint32(c&0x1f), 0x80
		case c >= 0xe0 && c <= 0xef:
			n, v, least = 3, uint32(c&0x0f), 0x800
		case c >= 0xf0 && c <= 0xf7:
			n, v, least = 4, uint32(c&0x07), 0x10000
		case c >= 0xf8 && c <= 0xfb:
			n, v, least = 5, uint32(c&0x03), 0x200000
		case c >= 0xfc && c <= 0xfd:
			n, v, least = 6, uint32(c&0x01), 0x4000000
		default:
			return false
		}
		if i+n > len(b) {
			return false
		}
		for _, cc := range b[i+1 : i+n] {
			if cc&0xc0 != 0x80 {
				return false
			}
			v = v<<6 | uint32(cc&0x3f)
		}
		if v < least || v >= 0xd800 && v <= 0xdfff {
			return false
		}
		i += n
	}
	return true
}
