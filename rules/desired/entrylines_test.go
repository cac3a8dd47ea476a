package desired

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// entryLinesByTokens is the Token-based reader entryLines replaced, kept
// as its oracle: it walks the document with json.Decoder.Token.
func entryLinesByTokens(data []byte) lineTable {
	type frame struct {
		object  bool
		wantKey bool
		name    string // an array's key
	}
	var out lineTable
	var stack []frame
	lastKey := ""
	var counted int64
	line := 1
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantKey {
			if k, ok := tok.(string); ok {
				lastKey, top.wantKey = k, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			if top != nil && !top.object && (top.name == "services" || top.name == "destinations" || top.name == "checks") {
				at := min(nextNonBlank(data, off), int64(len(data)))
				line += bytes.Count(data[counted:at], []byte{'\n'})
				counted = at
				out = append(out, line)
			}
			stack = append(stack, frame{object: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{name: lastKey})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].wantKey = true
			}
		default:
			if top != nil && top.object {
				top.wantKey = true
			}
		}
	}
}

func nextNonBlank(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
		off++
	}
	return off
}

// entryLinesDocs are JSON documents for entryLines: written by WriteJSON
// and by hand, nested, with escapes and with the arrays' names inside
// strings, converted from YAML, and the benchmark's.
func entryLinesDocs(t testing.TB) [][]byte {
	set, err := ReadText("rich", []byte(rich), nil)
	if err != nil {
		t.Fatal(err)
	}
	var written bytes.Buffer
	if err := WriteJSON(&written, set, Counters{Conns: true, Stats: true, Rate: true}); err != nil {
		t.Fatal(err)
	}
	docs := []string{
		written.String(),
		`{"version": 2, "services": [{"address": "10.0.0.1", "destinations": [{"address": "a"},
			{"address": "b", "check": {"type": "exec", "command": ["x", "{", "["]}}]},
		  {"address": "\"services\": [{", "destinations": []}, {"destinations": null}]}`,
		`{"note": "\"services\": [{\"a\": 1}, {", "services": [{"k\"ey": "v\\"}, {"x": "\\\"[{"}], "z": "]}"}`,
		`{"servic\u0065s": [{}, {}], "Services": [{}], "services ": [{}], "checks": [{"destinations": [{}, {}]}]}`,
		`{"services": [[{}, [{}]], {}], "x": [{"services": 1}, [{}, {}]], "y": [{}]}`,
		`{"services" : [ { } ,
		{ "destinations" :
		[ { } ] } ] }`,
		`{"checks": [{"service": "-t 10.0.0.1:80", "destinations": [{"address": "10.0.0.2"}]},
		 {"service": "-f 7", "check": {"type": "tcp"}}], "version": 2}`,
		`{"s": "caf\u00e9 ☕ \ud83d\ude00", "services": [{"d": "\/\b\f\n\r\t"}, {"e": ["\"", "\\", {"services": [{}]}]}]}`,
		`{}`, `[]`, `[{"services": [{}]}, {}]`, `"services"`, `{"services": []}`, `{"services": [{}]}`,
	}
	for _, y := range []string{healthYAML, string(benchYAML(3, 2))} {
		j, _, err := yamlToJSON([]byte(y), nil)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(j))
	}
	docs = append(docs, string(benchJSON(20, 3)))
	var out [][]byte
	for _, d := range docs {
		if !json.Valid([]byte(d)) {
			t.Fatalf("not JSON: %s", d)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(d)); err != nil {
			t.Fatal(err)
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, []byte(d), "", "\t"); err != nil {
			t.Fatal(err)
		}
		out = append(out, []byte(d), compact.Bytes(), indented.Bytes(),
			[]byte(strings.ReplaceAll(d, "\n", "\r\n")), []byte(strings.ReplaceAll(indented.String(), "\n", "\r\n")),
			[]byte("\n \r\n\t"+d+"\n\n"))
	}
	return out
}

// TestEntryLinesLikeTokens: the byte scan finds the lines the Token-based
// reader found.
func TestEntryLinesLikeTokens(t *testing.T) {
	found := 0
	for _, d := range entryLinesDocs(t) {
		want := entryLinesByTokens(d)
		if got := entryLines(d); !slices.Equal(got, want) {
			t.Errorf("entryLines = %v, want %v, of\n%s", got, want, d)
		}
		found += len(want)
	}
	if found < 500 {
		t.Errorf("the documents have %d entries: too few to test with", found)
	}
}

// FuzzEntryLines holds entryLines to the Token-based reader on valid
// JSON; on anything else it must only not fail.
func FuzzEntryLines(f *testing.F) {
	for _, d := range entryLinesDocs(f) {
		f.Add(d)
	}
	f.Add([]byte(`{"services": [{"a": "\`))
	f.Add([]byte(`{"services": [{}]}]]}} {"services": [{}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := entryLines(data)
		if !json.Valid(data) {
			return
		}
		if want := entryLinesByTokens(data); !slices.Equal(got, want) {
			t.Errorf("entryLines = %v, want %v", got, want)
		}
	})
}
