package keepalived

import (
	"slices"
	"testing"
)

// TestDigestLines: check_http.c digest_handler keeps a url's first digest
// and ignores a later one as a duplicate; one it cannot read is ignored
// and does not count as the first. It reads the 32 characters two at a
// time with strtoul in base 16, which takes a blank or a sign before one
// hex digit ("+f" is 0f, "-1" is ff).
func TestDigestLines(t *testing.T) {
	for _, c := range []struct {
		name, lines string
		want        []string // the url's digest list
		line        int
		notice      string
	}{{
		name:  "two digests: the first counts",
		lines: "digest 640205b7b0fc66c1ea91c463fac6334d\n digest 00000000000000000000000000000000\n",
		want:  []string{"640205b7b0fc66c1ea91c463fac6334d"}, line: 6, notice: "digest: a second one for this url: keepalived keeps the first",
	}, {
		name:  "an unreadable digest, then one",
		lines: "digest 640205b7\n digest 00000000000000000000000000000001\n",
		want:  []string{"00000000000000000000000000000001"}, line: 5, notice: `digest "640205b7": not 32 hex digits: keepalived ignores it`,
	}, {
		name:  "signs before single digits",
		lines: "digest +f-1000000000000000000000000000a\n",
		want:  []string{"0fff000000000000000000000000000a"}, line: 5, notice: `digest "+f-1000000000000000000000000000a": keepalived reads it as 0fff000000000000000000000000000a`,
	}, {
		name:  "0x is no pair strtoul reads whole",
		lines: "digest 0x000000000000000000000000000000\n",
		line:  5, notice: `not 32 hex digits: keepalived ignores it`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			conf := "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 {\n    HTTP_GET { url { path /x\n " + c.lines + " } }\n    inhibit_on_failure\n  }\n}\n"
			r := mustImport(t, conf, false)
			chk := svc(t, r).Check
			var got []string
			if chk != nil && len(chk.URLs) == 1 {
				got = chk.URLs[0].Digest
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("digests %q, want %q (check %+v)", got, c.want, chk)
			}
			if n := hasNotice(r, c.notice); n == nil || n.Line != c.line || n.Lossy {
				t.Errorf("notice %q at line %d: got %+v\nall: %v", c.notice, c.line, n, r.Notices)
			}
		})
	}
}
