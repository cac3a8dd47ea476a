package keepalived

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// lines is what parse gives for conf read as the file "k.conf" (includes
// from files): one "LINE: words" a statement, and "LINE: notice" for each
// notice, in the order keepalived reads them.
func lines(t *testing.T, conf, configID string, files map[string]string) ([]string, error) {
	t.Helper()
	fsys := FS{
		ReadFile: func(name string) ([]byte, error) {
			if c, ok := files[name]; ok {
				return []byte(c), nil
			}
			t.Fatalf("read of %s", name)
			return nil, nil
		},
		Glob: func(p string) ([]string, error) {
			if _, ok := files[p]; ok {
				return []string{p}, nil
			}
			return nil, nil
		},
	}
	stmts, notes, err := parse("k.conf", []byte(conf), fsys, configID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range stmts {
		for len(notes) > 0 && notes[0].seq <= s.seq {
			out = append(out, notes[0].String())
			notes = notes[1:]
		}
		w := string(s.Brace)
		if s.Brace == 0 {
			w = strings.Join(s.Words, " ")
		}
		out = append(out, fmt.Sprintf("%s:%d: %s", s.File, s.Line, w))
	}
	for _, n := range notes {
		out = append(out, n.String())
	}
	return out, nil
}

// TestReadLine: each rewriting of lib/parser.c read_line, in keepalived
// 2.2.7, gives the statements keepalived's keywords get, at the line of
// the file the text comes from, with a notice where keepalived keeps or
// drops text it does not take as written. Each case names the function of
// lib/parser.c it follows.
func TestReadLine(t *testing.T) {
	for _, c := range []struct {
		name, conf, id string
		files          map[string]string
		want           []string
	}{{
		// check_definition: "$NAME=" at the start of a line; the text
		// after '=' and its blanks is the value.
		name: "definition and use", conf: "$A=  x y\nk $A\n",
		want: []string{"k.conf:2: k x y"},
	}, {
		// check_definition: a name is a letter or '_', then letters,
		// digits and '_', with '=' right after it; else the line is
		// keywords.
		name: "not definitions", conf: "$A-B=1\n$1=2\n$A =3\n",
		want: []string{"k.conf:1: $A: no such definition (yet): keepalived keeps the text as written", "k.conf:1: $A-B=1", "k.conf:2: $1=2",
			"k.conf:3: $A: no such definition (yet): keepalived keeps the text as written", "k.conf:3: $A =3"},
	}, {
		// find_definition: $NAME ends before a blank, ',' or ')' or at
		// the end of the line; ${NAME} anywhere.
		name: "where a use ends", conf: "$A=v\nk $A,w ($A) ${A}.x\nk $A.x\n",
		want: []string{"k.conf:2: k v,w (v) v.x",
			`k.conf:3: $A followed by '.': keepalived replaces $NAME only before a blank, ',' or ')' or at the end of the line (${A} anywhere), and keeps the text as written`,
			"k.conf:3: k $A.x"},
	}, {
		// replace_param: a name without definition stays as written,
		// $AB is not $A followed by B, '$' without a name is text, and
		// the braces of ${B} are braces then.
		name: "no definition", conf: "$A=v\nk $AB 4$ $1 ${B}\n",
		want: []string{"k.conf:2: $AB: no such definition (yet): keepalived keeps the text as written",
			"k.conf:2: $B: no such definition (yet): keepalived keeps the text as written",
			"k.conf:2: k $AB 4$ $1 $", "k.conf:2: {", "k.conf:2: B", "k.conf:2: }"},
	}, {
		// check_definition: a definition replaces the one before from
		// its line on.
		name: "redefinition", conf: "$A=1\nk $A\n$A=2\nk $A\n",
		want: []string{"k.conf:2: k 1", "k.conf:4: k 2"},
	}, {
		// replace_param reads the text it put in from where it begins,
		// and read_line decomments the line again: a replacement may
		// make a comment.
		name: "recursive and textual", conf: "$A=${B}$B\n$B=b\n$H=x${_HASH}y\n$E=\nk $A $H z\nk$E 1\n",
		want: []string{"k.conf:5: k bb x", "k.conf:6: k 1"},
	}, {
		// read_line and replace_param: a definition that brings itself
		// back never ends in keepalived.
		name: "endless", conf: "$A=$A\nk $A\n",
		want: []string{"error: k.conf:2: $A brings itself back without end: keepalived never finishes reading this line"},
	}, {
		// replace_param: no replacement makes a line MAXBUF (1024)
		// long; the line is read as it is then.
		name: "line too long", conf: "$A=" + strings.Repeat("x", 600) + "\nk $A $A\n",
		want: []string{"k.conf:2: replacing $A would make the text 1024 characters or more: keepalived stops replacing and reads it as it is then",
			"k.conf:2: k " + strings.Repeat("x", 600) + " $A"},
	}, {
		// check_definition and read_line: a '\' ending the line continues
		// the definition, up to a line without it or an empty line; its
		// use, at the end of a line only, reads its lines there.
		name: "multi-line", conf: "$M=a 1 \\\n  b { \\\n\n c }\n$N=  \\\n x\nk $M\nk $M 2\nk $N\n",
		want: []string{"k.conf:3: an empty line ends the definition of $M (line 1) although its line before ends with '\\': keepalived reads the lines after it as they are",
			"k.conf:4: c", "k.conf:4: }",
			"k.conf:7: $M is a definition of several lines: keepalived reads them here, and what is said of them names this line",
			"k.conf:7: k a 1", "k.conf:7: b", "k.conf:7: {",
			"k.conf:8: $M: a definition of several lines is replaced only at the end of a line: keepalived keeps the text as written", "k.conf:8: k $M 2",
			"k.conf:9: k x"},
	}, {
		// add_seq: ~SEQ(NAME, end) from 1 (from -1 below 0, down to 0
		// from 0), ~SEQ(NAME, start, end) by 1 or -1, ~SEQ(NAME, start,
		// step, end); ~SEQx in hexadecimal; numbers as strtol base 0.
		name: "~SEQ", conf: "~SEQ(i, 2) a $i\n~SEQ(i,0) b $i\n~SEQ (i, -2) c $i\n~SEQ(i, 5, 4) d $i\n~SEQ(i, 1, 2, 5) e $i\n~SEQx(i, 9, 0xb) f $i\n~SEQ(i, 010, 8) g $i\n",
		want: []string{"k.conf:1: a 1", "k.conf:1: a 2", "k.conf:2: b 1", "k.conf:2: b 0", "k.conf:3: c -1", "k.conf:3: c -2",
			"k.conf:4: d 5", "k.conf:4: d 4", "k.conf:5: e 1", "k.conf:5: e 3", "k.conf:5: e 5",
			"k.conf:6: f 9", "k.conf:6: f a", "k.conf:6: f b", "k.conf:7: g 8"},
	}, {
		// add_seq: its numbers may use definitions; ~SEQs nest, the inner
		// one read with the outer's name set.
		name: "~SEQ nested", conf: "$N=2\n~SEQ(i, $N) ~SEQ(j, $i, 2) k ${i}.$j\n",
		want: []string{"k.conf:2: k 1.1", "k.conf:2: k 1.2", "k.conf:2: k 2.2"},
	}, {
		// add_seq and read_line: an invalid ~SEQ is reported and its line
		// skipped.
		name: "~SEQ invalid", conf: "~SEQ(i, 08) a\n~SEQ(i, 1, -1, 3) b\n~SEQx(i, -1, 2) c\n~SEQ i, 2 d\n",
		want: []string{"k.conf:1: ~SEQ(i, 08) a: a number is not one: keepalived reports it invalid and skips the line",
			"k.conf:2: ~SEQ(i, 1, -1, 3) b: its step does not lead from start to end: keepalived reports it invalid and skips the line",
			"k.conf:3: ~SEQx(i, -1, 2) c: ~SEQx takes no negative number: keepalived reports it invalid and skips the line",
			"k.conf:4: ~SEQ i, 2 d: no '(' after ~SEQ: keepalived reports it invalid and skips the line"},
	}, {
		// add_lst: one name and its values, or a set of names and sets of
		// values ("" for those missing).
		name: "~LST", conf: "~LST(i, a, b) k $i\n~LST({x, y}, {1, 2}, {3}) l $x ${y}.\n",
		want: []string{"k.conf:1: k a", "k.conf:1: k b", "k.conf:2: l 1 2.", "k.conf:2: l 3 ."},
	}, {
		// read_line: a multi-line definition used in a ~SEQ's line is read
		// whole before the ~SEQ goes on.
		name: "multi-line in ~SEQ", conf: "$M=a $i \\\nb\n~SEQ(i, 2) $M\n",
		want: []string{"k.conf:3: $M is a definition of several lines: keepalived reads them here, and what is said of them names this line",
			"k.conf:3: a 1", "k.conf:3: b", "k.conf:3: a 2", "k.conf:3: b"},
	}, {
		// read_line: "@ID" keeps the rest of the line for the instance
		// ID only, "@^ID" for any other; an ID alone is dropped.
		name: "@ID", id: "a", conf: "@a k 1\n@b k 2\n@^a k 3\n@^b k 4\n@a\n@a $X=5\nk $X\n",
		want: []string{"k.conf:1: k 1", "k.conf:4: k 4", "k.conf:7: k 5"},
	}, {
		// read_line reads the text after a brace as its next line, so an
		// @ID there selects it and what follows.
		name: "@ID after a brace", id: "a", conf: "k { @b x }\nl { @a y }\n",
		want: []string{"k.conf:1: k", "k.conf:1: {", "k.conf:2: l", "k.conf:2: {", "k.conf:2: y", "k.conf:2: }"},
	}, {
		// set_std_definitions: _INSTANCE is the instance, _HASH and _BANG
		// the comment characters; a definition may replace them.
		name: "standard definitions", id: "lb1", conf: "k $_INSTANCE ${_BANG}\n$_INSTANCE=x\nk $_INSTANCE\n",
		want: []string{"k.conf:1: k lb1", "k.conf:3: k x"},
	}, {
		// get_random: a new number each time keepalived reads the line.
		name: "_RANDOM", conf: "k ${_RANDOM 1 3}\n",
		want: []string{"error: k.conf:1: ${_RANDOM}: keepalived draws a new number each time it reads the configuration; lvsctl cannot write one that stays the same"},
	}, {
		// decomment: "\#" and "\!" outside quotes are the characters, a
		// '\' ending a line that is no definition stays.
		name: "comments and a final '\\'", conf: "k a\\#b \"c#\" # d\nk e \\\n",
		want: []string{"k.conf:1: k a#b c#",
			`k.conf:2: a '\' ending a line continues a definition only: keepalived reads it as a character of the line`, `k.conf:2: k e\`},
	}, {
		// read_line and check_include: an include line may come from a
		// ~SEQ; each include is opened when read, so the last is read
		// first.
		name: "include from ~SEQ", conf: "~SEQ(i, 2) include f$i\nk 3\n", files: map[string]string{"f1": "k 1\n", "f2": "k 2\n"},
		want: []string{"f2:1: k 2", "f1:1: k 1", "k.conf:2: k 3"},
	}, {
		// read_line: definitions hold across files; a line from a
		// definition names the line that uses it.
		name: "definitions across includes", conf: "$M=a \\\nb\ninclude f\nk $M\n", files: map[string]string{"f": "$M=c \\\nd\nk $M\n"},
		want: []string{"f:3: $M is a definition of several lines: keepalived reads them here, and what is said of them names this line",
			"f:3: k c", "f:3: d",
			"k.conf:4: $M is a definition of several lines: keepalived reads them here, and what is said of them names this line",
			"k.conf:4: k c", "k.conf:4: d"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			got, err := lines(t, c.conf, c.id, c.files)
			if err != nil {
				got = []string{"error: " + err.Error()}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestDefinitionsImport: a virtual server written with definitions and a
// ~SEQ converts as the same one written out, with the lines of the file.
func TestDefinitionsImport(t *testing.T) {
	dir := files(t, map[string]string{"k.conf": `$RS=real_server 10.0.0.$i 80 { \
  weight $i \
  TCP_CHECK { connect_timeout 1 } \
}
virtual_server 192.0.2.1 80 {
  protocol TCP
  ~SEQ(i, 3) $RS
  real_server 10.0.0.9 80 { bad 1 }
}
`})
	r, err := Import(filepath.Join(dir, "k.conf"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range svc(t, r).Destinations {
		got = append(got, fmt.Sprint(d.Address, " ", d.Weight))
	}
	if want := []string{"10.0.0.1 1", "10.0.0.2 2", "10.0.0.3 3", "10.0.0.9 1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("destinations %q, want %q", got, want)
	}
	if n := hasNotice(r, "no inhibit_on_failure"); n == nil || n.Line != 7 {
		t.Errorf("notice %+v, want one at line 7, the ~SEQ's", n)
	}
	if n := hasNotice(r, "bad: unknown keyword"); n == nil || n.Line != 8 {
		t.Errorf("notice %+v, want one at line 8", n)
	}
}

// TestIncludeBraces: keepalived globs include patterns with GLOB_BRACE
// (lib/parser.c open_and_check_glob): each alternative in order, each
// sorted.
func TestIncludeBraces(t *testing.T) {
	if got, want := braces("a{b,c{d,e}}f{1,2}"), []string{"abf1", "abf2", "acdf1", "acdf2", "acef1", "acef2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("braces = %q, want %q", got, want)
	}
	if got := braces("a{b"); !reflect.DeepEqual(got, []string{"a{b"}) {
		t.Errorf("braces(a{b) = %q", got)
	}
	got, err := lines(t, "include {z,a}.conf\n", "", map[string]string{"z.conf": "k z\n", "a.conf": "k a\n"})
	if want := []string{"z.conf:1: k z", "a.conf:1: k a"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}

// TestEndlessLines: a definition of several lines that ends by using
// itself makes lines without end in keepalived (lib/parser.c read_line
// reads each line of its text, the last one using it again); so does one
// that brings itself back after a brace (read_line reads the text after a
// brace as its next line), and ~SEQs nested deep, for years. parse stops
// with an error at the line.
func TestEndlessLines(t *testing.T) {
	for conf, want := range map[string]string{
		"$M=k \\\n$M\n$M\n":                   "k.conf:3: ~SEQ, ~LST and definitions of several lines make more than",
		"~SEQ(a, 999999) ~SEQ(b, 999999) k\n": "k.conf:1: ~SEQ, ~LST and definitions of several lines make more than",
		"$T={ $T\nk $T\n":                     "k.conf:2: a definition brings itself back after a brace without end",
	} {
		_, err := lines(t, conf, "", nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", conf, err, want)
		}
	}
}

// TestIncludeBracesBound: braces multiply the patterns (glob(3) would
// read 2^40 here): past maxBraces the include is refused, at once.
func TestIncludeBracesBound(t *testing.T) {
	_, err := lines(t, "include "+strings.Repeat("{a,b}", 40)+"\n", "", nil)
	if err == nil || !strings.Contains(err.Error(), "more than lvsctl reads (1024)") {
		t.Errorf("err = %v", err)
	}
}
