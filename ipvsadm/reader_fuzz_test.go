package ipvsadm

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// configStreamRead models ipvsadm 1.31's config_stream_read, written from
// its C source independently of RestoreReader: one call reads one
// line with fscanf("%4096[^ \t\n\r]%1[ \t\n\r]") in a loop; a failed
// conversion (white space next) skips blanks with fgetc up to a newline
// (the line ends) or EOF (the line is discarded, and the input ends);
// tokens "ipvsadm" are not stored; at EOF a line with stored tokens is
// returned, one without ends the input. It returns the line and false at
// the end.
func configStreamRead(in []byte, pos *int, prog string) ([]string, bool) {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	line := []string{prog}
	stored := 0
	for *pos < len(in) {
		if isSpace(in[*pos]) {
			// fscanf returns 0: nothing matched the first conversion.
			for {
				if *pos >= len(in) {
					return nil, false
				}
				c := in[*pos]
				*pos++
				if c == '\n' {
					return line, true
				}
				if !isSpace(c) {
					*pos--
					break
				}
			}
			continue
		}
		start := *pos
		for *pos < len(in) && !isSpace(in[*pos]) && *pos-start < 4096 {
			*pos++
		}
		token := in[start:*pos]
		if i := bytes.IndexByte(token, 0); i >= 0 {
			token = token[:i] // a C string
		}
		newline := false
		if *pos < len(in) && isSpace(in[*pos]) {
			newline = in[*pos] == '\n'
			*pos++
		}
		if string(token) != "ipvsadm" {
			stored++
			line = append(line, string(token))
		}
		if newline {
			return line, true
		}
	}
	if stored == 0 {
		return nil, false
	}
	return line, true
}

func modelLines(in []byte) [][]string {
	var out [][]string
	pos := 0
	for {
		line, ok := configStreamRead(in, &pos, "ipvsadm")
		if !ok {
			return out
		}
		out = append(out, line)
	}
}

func readerLines(in []byte) [][]string {
	var out [][]string
	r := NewRestoreReader(bytes.NewReader(in))
	for {
		line, ok := r.Next("ipvsadm")
		if !ok {
			return out
		}
		out = append(out, line)
	}
}

var readerSeeds = []string{
	"",
	"\n",
	"-A -t 1.1.1.1:80\n",
	"-A -t 1.1.1.1:80",
	"-A -t 1.1.1.1:80 ",
	"-A -t 1.1.1.1:80  ",
	"-A -t 1.1.1.1:80\t\r",
	"  -A\t-t  1.1.1.1:80 \r\n\r\n",
	"ipvsadm -A ipvsadm -t 1.1.1.4:80\nipvsadm\nipvsadm",
	"# comment\n",
	"-A -t 1.1.1.1:80 # x\n",
	"-A\x00x -t 1.1.1.1:80\n",
	"-L -n\n-S\n-C\n-Z\n-h\n",
	"-A -t 10.0.0.1:80\n-A -t 10.0.0.1:80\n-a -t 10.0.0.1:80 -r 1.1.1.1 -x 5 -y 10\n",
	strings.Repeat("x", 4096) + " y\n",
	strings.Repeat("x", 4097) + "\n",
	strings.Repeat("x", 9000),
	// Lines longer than the reader's 64 KiB buffer.
	strings.Repeat("ab ", 30000) + "\n-C\n" + strings.Repeat("y", 70000) + " ",
}

// TestReaderMatchesModel compares the tokenizer with the model of the C
// code on the seed inputs (the fuzz target explores further).
func TestReaderMatchesModel(t *testing.T) {
	for _, in := range readerSeeds {
		if got, want := readerLines([]byte(in)), modelLines([]byte(in)); !reflect.DeepEqual(got, want) {
			t.Errorf("input %q:\nRestoreReader %q\nmodel         %q", in, got, want)
		}
	}
}

// FuzzRestoreReader: for any input, the tokenizer splits it like ipvsadm's
// C code, and both restore engines run it without panicking, printing the
// same messages in the same order with the same status and final table.
func FuzzRestoreReader(f *testing.F) {
	for _, s := range readerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if got, want := readerLines(in), modelLines(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("input %q:\nRestoreReader %q\nmodel         %q", in, got, want)
		}
		want := restoreWith(t, nil, string(in), 1, 0)
		got := restoreWith(t, Pipelined(3), string(in), 1, 0)
		compareRuns(t, string(in), want, got)
	})
}
