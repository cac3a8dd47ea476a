package cmdline

import (
	"strings"
	"testing"
)

// FuzzParse: ipvsadm's option parser on any command line (split at
// blanks, in both popt modes). It must end without a panic; a refusal
// carries a message (usage on stdout, or a diagnostic on stderr) ending
// in a newline, and an accepted line yields a request or a command that
// needs none.
func FuzzParse(f *testing.F) {
	for _, l := range savedLines {
		f.Add(l, false)
	}
	for _, l := range []string{"-A -t 10.0.0.1:80 -s rr -p 60 -M 255.255.255.0", "-L -n --stats --exact", "-Z -f 1",
		"--set 10 20 30", "--start-daemon master --mcast-interface lo --syncid 7", "-a -f 7 -r 192.168.0.1 -i --tun-type gue --tun-port 6080",
		"-E -t [2001:db8::1]:80 -s mh -b flag-1,mh-port", "-A -t 10.0.0.1:http -s sh -b sh-fallback,sh-port -o", "-h", "-v", "--", "-Ln -c --persistent-conn"} {
		f.Add(l, false)
		f.Add(l, true)
	}
	resolver := testResolver(f)
	f.Fuzz(func(t *testing.T, line string, posix bool) {
		p := &Parser{Resolver: resolver, Posix: posix}
		inv, o := p.Parse(append([]string{"ipvsadm"}, strings.Fields(line)...))
		switch {
		case o != nil:
			if o.Kind == Success {
				t.Fatalf("%q: refused with a success outcome", line)
			}
			if o.Kind != Crash && o.Stdout == "" && o.Stderr == "" {
				t.Fatalf("%q: refused (%v) without a message", line, o.Kind)
			}
			for _, s := range []string{o.Stdout, o.Stderr} {
				if s != "" && !strings.HasSuffix(s, "\n") {
					t.Fatalf("%q: message %q does not end in a newline", line, s)
				}
			}
		case inv == nil:
			t.Fatalf("%q: neither an invocation nor an outcome", line)
		default:
			_, _ = inv.Request()
		}
	})
}
