package desired

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// entryDocs are documents of the plain form, read by entries, and near
// misses, read whole.
func entryDocs() []string {
	return []string{
		string(benchYAML(4, 3)),
		healthYAML,
		"---\n# a director\nversion: 2\nservices: # the web\n- {protocol: tcp, address: 10.0.0.1, port: 80}\n-\n  protocol: udp\n  address: 10.0.0.1\n  port: 53\nother: 1\n",
		"version: 2\nservices:\n  - protocol: tcp\n# between\n    address: 10.0.0.1\n\n    port: 80\n    check: |\n      - not an entry\n  - {protocol: tcp,\n     address: 10.0.0.2, port: 80}\n",
		"services:\n  - {a: 1}\n  - {a: 1}\n",
		"services:\n  - {a: 'x\n  - b'}\n",
		"services:\n  - {a: 1,\n  b: 2}\n",
		"services:\n  - a: 1\n - b: 2\n",
		"services:\n  - a\n  - b\n",
		"services:\n  - a: &x 1\n  - b: *x\n",
		"services:\n\t- a: 1\n",
		"%YAML 1.2\n---\nservices:\n  - a: 1\n",
		"services:\n  - a: 1\n---\nservices:\n  - b: 2\n",
		"services: [{a: 1}]\n",
		"a: \"x\nservices:\n  - b: 1\"\n",
		"services:\n  - a: 1\nservices:\n  - b: 2\n",
		"services:\n  - a: 1\n  c: 2\n",
		"services:\n  - a: 1\n    a: 2\n",
		"services:\n  - a: 0x10\n    b: 1e3\n    c: ~\n    d: yes\n",
		"services:\n  - {0}\r0",
		"services:\n  - a: 1\u2028b: 2\n",
		"services:\n  - a: 1\u0085b: 2\n",
		"services:\n  - a: '\u00a3 \u2010'\n", // the lead bytes of NEL and LS, in other characters
	}
}

// Read by entries or whole, a document is the same JSON with the same
// entry lines and errors; the plain form is read by entries.
func TestYAMLEntriesAsWhole(t *testing.T) {
	plain := map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 18: true, 22: true}
	for i, d := range entryDocs() {
		want, wantErr := yamlToJSONByMarshal([]byte(d))
		got, lines, err := yamlToJSON([]byte(d), nil)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !bytes.Equal(got, want) {
			t.Errorf("doc %d: wrote %q (error %v), want %q (error %v)", i, got, err, want, wantErr)
			continue
		}
		if err == nil && !slices.Equal(lines, entryLines(got)) {
			t.Errorf("doc %d: entry lines %v, want %v", i, lines, entryLines(got))
		}
		if _, _, ok := yamlByEntries([]byte(d), nil); ok != plain[i] {
			t.Errorf("doc %d: read by entries %v, want %v:\n%s", i, ok, plain[i], d)
		}
	}
}

// A cache gives the JSON a read without it gives, through edits of the
// document; it holds the last document's entries only.
func TestYAMLCache(t *testing.T) {
	doc := string(benchYAML(6, 3))
	edits := []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.Replace(s, "weight: 1", "weight: 7", 1) },
		func(s string) string { return "# a comment moves every line\n" + s },
		func(s string) string {
			i := strings.Index(s, "  - ")
			return s[:i] + "  - {protocol: tcp, address: 10.9.9.9, port: 80}\n" + s[i:]
		},
	}
	cache := &YAMLCache{}
	for i, edit := range edits {
		doc = edit(doc)
		want, wantLines, err := yamlToJSON([]byte(doc), nil)
		if err != nil {
			t.Fatal(err)
		}
		got, lines, err := yamlToJSON([]byte(doc), cache)
		if err != nil || !bytes.Equal(got, want) || !slices.Equal(lines, wantLines) {
			t.Errorf("edit %d: cached read wrote %q %v (error %v), want %q %v", i, got, lines, err, want, wantLines)
		}
		if n := strings.Count(doc, "\n  - "); len(cache.entries) != n {
			t.Errorf("edit %d: cache holds %d entries, the document has %d", i, len(cache.entries), n)
		}
	}
}

// FuzzYAMLEntries holds the read by entries to the whole read.
func FuzzYAMLEntries(f *testing.F) {
	for _, d := range entryDocs() {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, lines, ok := yamlByEntries(data, nil)
		if !ok {
			return
		}
		want, wantErr := yamlToJSONByMarshal(data)
		if wantErr != nil || !bytes.Equal(got, want) {
			t.Fatalf("by entries %q, whole %q (error %v)", got, want, wantErr)
		}
		if !slices.Equal(lines, entryLines(got)) {
			t.Fatalf("entry lines %v, want %v, of %q", lines, entryLines(got), got)
		}
	})
}

// TestReadCachedAsRead: a read through a cache, which decodes only the
// entries it has not seen, gives what a read without one gives, errors
// included, through edits of the document; an entry the last read had is
// not decoded again.
func TestReadCachedAsRead(t *testing.T) {
	doc := string(benchYAML(5, 3))
	first := strings.Index(doc, "  - ")
	edits := []struct {
		name string
		edit func(string) string
	}{
		{"as it is", func(s string) string { return s }},
		{"a weight", func(s string) string { return strings.Replace(s, "weight: 1", "weight: 7", 1) }},
		{"a comment moves every line", func(s string) string { return "# moved\n" + s }},
		{"a new service", func(s string) string {
			i := strings.Index(s, "  - ")
			return s[:i] + "  - {protocol: tcp, address: 10.9.9.9, port: 80}\n" + s[i:]
		}},
		{"an unknown field in an entry", func(s string) string { return strings.Replace(s, "weight: 7", "wieght: 7", 1) }},
		{"the field mended", func(s string) string { return strings.Replace(s, "wieght: 7", "weight: 7", 1) }},
		{"an unknown key at the top", func(s string) string { return "colour: red\n" + s }},
		{"the key gone", func(s string) string { return strings.Replace(s, "colour: red\n", "", 1) }},
		{"a bad version", func(s string) string { return strings.Replace(s, "version: 2", "version: 9", 1) }},
		{"version 2 again", func(s string) string { return strings.Replace(s, "version: 9", "version: 2", 1) }},
		{"a duplicate service", func(s string) string { return s + "  - {protocol: tcp, address: 10.9.9.9, port: 80}\n" }},
	}
	cache := &YAMLCache{}
	decoded := map[string]*JSONService{} // entry text: its decoded service, after the last read
	reused := 0
	for _, e := range edits {
		doc = e.edit(doc)
		wantSet, wantH, wantErr := Read("d.yaml", strings.NewReader(doc), nil)
		set, h, err := ReadCached("d.yaml", strings.NewReader(doc), nil, cache)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(set, wantSet) || !reflect.DeepEqual(h, wantH) {
			t.Fatalf("%s: cached read gave %v, %+v, %+v; want %v, %+v, %+v", e.name, err, set, h, wantErr, wantSet, wantH)
		}
		if err != nil {
			decoded = map[string]*JSONService{}
			continue
		}
		now := map[string]*JSONService{}
		for text, ej := range cache.entries {
			if ej.svc == nil {
				t.Fatalf("%s: entry %q not decoded", e.name, text)
			}
			if was := decoded[text]; was != nil {
				if was != ej.svc {
					t.Errorf("%s: entry %q decoded again", e.name, text)
				}
				reused++
			}
			now[text] = ej.svc
		}
		decoded = now
	}
	if first < 0 || reused == 0 {
		t.Fatal("no entry was taken from the cache")
	}
}
