//go:build !lab

package wrappers

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// This test needs a Debian host's GNU grep, bash and C.UTF-8 locale. The
// lab VM, where the lab build of these tests runs, has busybox's grep and
// no locales, so the file is left out of that build.

// scriptFilter is what Debian's ipvsadm-restore does to its input before
// "ipvsadm -R" reads it, with the script's own commands.
const scriptFilter = `INPUT="$(grep -v '^#')"; echo "$INPUT"`

// TestFilterMatchesBashAndGrep runs the script's filtering commands with
// the real bash and GNU grep and compares what they pass on to ipvsadm -R
// (and what grep says on stderr) with RestoreScript's filtering.
func TestFilterMatchesBashAndGrep(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is needed to check the script's behaviour: %v", err)
	}
	inputs := []string{
		"",
		"\n",
		"\n\n\n",
		"-A -t 1.1.1.1:80\n",
		"-A -t 1.1.1.1:80",
		"# comment\n-A -t 1.1.1.1:80\n# another\n",
		"#only\n#comments",
		"  # indented comment stays\n",
		"\n\n-A -t 1.1.1.1:80\n\n\n-a -t 1.1.1.1:80 -r 2.2.2.2\n\n\n\n",
		"-A -t 1.1.1.1:80\r\n#x\r\n\r\n",
		"-n\n", "-n", "-e\n\n", "-E", "-nEe\n", "-neX\n", "-\n", "--\n", "-n -e\n", "#\n-n\n#\n",
		"ab\x00cd\n", "#\x00\n", "a\n#\x00\n", "#a\n#\x00", "#\x00#\n",
		"x\xff y\n-A -t 1.1.1.1:80\n", "#\xff\n",
		"x\xed\xa0\x80\n", "x\xc0\x80\n", "x\xf4\x90\x80\x80\n", "x\xf8\x88\x80\x80\x80\n",
		"x\xfc\x84\x80\x80\x80\x80\n", "x\xfe\n", "x\xf0\x80\x80\x80\n", "x\xe2\x82\n", "x\xe2\x82\xac\n",
	}
	for _, locale := range []string{"C", "C.UTF-8"} {
		for _, in := range inputs {
			cmd := exec.Command(bash, "-c", scriptFilter)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=" + locale}
			cmd.Stdin = strings.NewReader(in)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v", scriptFilter, err)
			}
			kept, warning := grepComments([]byte(in), utf8Locale(func(k string) string {
				if k == "LC_ALL" {
					return locale
				}
				return ""
			}))
			got, _ := io.ReadAll(echo(bytes.TrimRight(kept, "\n")))
			if string(got) != stdout.String() || warning != stderr.String() {
				t.Errorf("LC_ALL=%s, input %q: got %q, stderr %q; bash and grep give %q, stderr %q",
					locale, in, got, warning, stdout.String(), stderr.String())
			}
		}
	}
}
