package desired

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/lvskit/lvskit/internal/jsonstr"
)

// yamlKey matches a first line that opens a YAML mapping ("version: 2"),
// which no rules text line does: those start with an option or "ipvsadm".
var yamlKey = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*[ \t]*:([ \t]|$)|---)`)

// isYAML reports whether a document whose start is head is YAML rather than
// rules text or JSON: its first line that is neither blank nor a comment
// opens a mapping.
func isYAML(head []byte) bool {
	for rest := head; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		line = bytes.TrimRight(line, " \t\r")
		if len(bytes.TrimSpace(line)) == 0 || bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte("#")) {
			continue
		}
		return yamlKey.Match(line)
	}
	return false
}

// yamlToJSON converts a YAML document into JSON that puts every value on
// the line where the YAML has it, so that the JSON reader's messages name
// the YAML's lines; it also returns the JSON's entry lines, the ones
// entryLines would find in it. Anchors and aliases are expanded; keys must
// be strings, and a mapping that gives a key twice is an error at the
// second one's line (see repeatedYAMLKey). The YAML is parsed with go.yaml.in/yaml/v3
// (docs/decisions/0014-health-checks.md says why).
func yamlToJSON(data []byte, cache *YAMLCache) ([]byte, lineTable, error) {
	if cache != nil {
		cache.order = nil
	}
	if b, lines, ok := yamlByEntries(data, cache); ok {
		return b, lines, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, nil, yamlError(data, err)
	}
	if len(root.Content) == 0 {
		return []byte("{}"), lineTable{}, nil
	}
	// JSON is about as long as YAML: its quotes make up for the
	// indentation it drops.
	w := &jsonWriter{b: make([]byte, 0, len(data)+len(data)/4+64), line: 1, lines: lineTable{}}
	if err := w.node(root.Content[0], 0, false); err != nil {
		return nil, nil, err
	}
	return w.b, w.lines, nil
}

// yamlError is the parser's error of data as a lineError at the line of
// the problem. The parser's "line N" is where the construct it was reading
// began, counted from 0 or 1 as the error's kind has it, or is missing.
// The problem is on the first line k, from there, such that the document
// cut after line k fails with the same error; blank lines after the cut
// move a failure at the cut's end off line k. Only a failed read pays for
// this search.
func yamlError(data []byte, err error) error {
	text := err.Error()
	msg := strings.TrimPrefix(text, "yaml: ")
	from := 1
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				from, msg = max(n, 1), strings.TrimSpace(rest[i+1:])
			}
		}
	}
	// ends[k-1] is the offset just past line k.
	var ends []int
	for off := 0; off < len(data); {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			off = len(data)
		} else {
			off += i + 1
		}
		ends = append(ends, off)
	}
	var cut []byte
	same := func(k int, pad bool) bool {
		cut = append(cut[:0], data[:ends[k-1]]...)
		if pad {
			cut = append(cut, "\n\n\n"...)
		}
		var root yaml.Node
		e := yaml.Unmarshal(cut, &root)
		return e != nil && e.Error() == text
	}
	lo, hi := from, len(ends)
	if lo > hi {
		return &lineError{Line: from, Msg: "YAML: " + msg}
	}
	pad := same(hi, true)
	if !pad && !same(hi, false) {
		return &lineError{Line: from, Msg: "YAML: " + msg}
	}
	// The problem is mostly a few lines after where its construct began:
	// steps that double from there, then halves of the last step.
	for step := 1; lo < hi; step *= 2 {
		k := min(lo+step-1, hi-1)
		if same(k, pad) {
			hi = k
			break
		}
		lo = k + 1
	}
	for lo < hi {
		k := lo + (hi-lo)/2
		if same(k, pad) {
			hi = k
		} else {
			lo = k + 1
		}
	}
	return &lineError{Line: lo, Msg: "YAML: " + msg}
}

// jsonWriter writes JSON, padding with newlines to keep YAML lines.
type jsonWriter struct {
	b    []byte
	line int
	// lines holds the line of each entry written, as entryLines would
	// find it in the output: each object written directly within an
	// array opened while entryKey was true.
	lines    lineTable
	entryKey bool // the last key written names entries

	// entries, when set, writes the services' entries in place of the
	// null value of the top-level "services" key on line entriesLine (a
	// skeleton's, see yamlByEntries); false when it could not.
	entries      func() bool
	entriesLine  int
	wroteEntries bool
}

// errEntries stops a skeleton's writing when its entries could not be
// written.
var errEntries = errors.New("entries")

func (w *jsonWriter) at(line int) {
	for w.line < line {
		w.b = append(w.b, '\n')
		w.line++
	}
}

// maxDepth bounds nesting (and alias expansion) of a document.
const maxDepth = 64

// node writes n; entry says it is an element of an array of entries.
func (w *jsonWriter) node(n *yaml.Node, depth int, entry bool) error {
	if depth > maxDepth {
		return &lineError{Line: n.Line, Msg: "YAML: nested too deeply"}
	}
	w.at(n.Line)
	switch n.Kind {
	case yaml.AliasNode:
		return w.node(n.Alias, depth+1, entry)
	case yaml.MappingNode:
		if entry {
			w.lines = append(w.lines, w.line)
		}
		if err := repeatedYAMLKey(n.Content); err != nil {
			return err
		}
		w.b = append(w.b, '{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "!!int") {
				return &lineError{Line: k.Line, Msg: "YAML: a key must be a name"}
			}
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.at(k.Line)
			w.b = jsonstr.Append(w.b, k.Value)
			w.b = append(w.b, ':')
			// "checks" names entries at the top of a checks document only.
			w.entryKey = k.Value == "services" || k.Value == "destinations" || k.Value == "checks" && depth == 0
			if w.entries != nil && depth == 0 && k.Value == "services" && k.Line == w.entriesLine &&
				v.Kind == yaml.ScalarNode && v.Tag == "!!null" && !w.wroteEntries {
				if !w.entries() {
					return errEntries
				}
				w.wroteEntries = true
				continue
			}
			if err := w.node(v, depth+1, false); err != nil {
				return err
			}
		}
		w.b = append(w.b, '}')
	case yaml.SequenceNode:
		w.b = append(w.b, '[')
		entries := w.entryKey
		for i, c := range n.Content {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			if err := w.node(c, depth+1, entries); err != nil {
				return err
			}
		}
		w.b = append(w.b, ']')
	case yaml.ScalarNode:
		return w.scalar(n)
	default:
		return &lineError{Line: n.Line, Msg: "YAML: unexpected node"}
	}
	return nil
}

// repeatedYAMLKey is the error of a mapping, whose keys and values
// alternate in content, that gives a key twice: the JSON decoder would
// keep the last value and drop the first without a word. Keys are
// compared as the decoder matches them to fields, letter case aside (see
// sameKey). Keys that are no names are left to the writer to refuse.
func repeatedYAMLKey(content []*yaml.Node) error {
	if len(content) <= 2*smallObject {
		for i := 2; i+1 < len(content); i += 2 {
			for j := 0; j < i; j += 2 {
				if a, b := content[j], content[i]; a.Kind == yaml.ScalarNode && b.Kind == yaml.ScalarNode && sameKey(a.Value, b.Value) {
					return repeatedKeyError(a.Value, a.Line, b.Value, b.Line)
				}
			}
		}
		return nil
	}
	seen := make(map[string]*yaml.Node, len(content)/2)
	for i := 0; i+1 < len(content); i += 2 {
		k := content[i]
		if k.Kind != yaml.ScalarNode {
			continue
		}
		f := foldKey(k.Value)
		if a := seen[f]; a != nil {
			return repeatedKeyError(a.Value, a.Line, k.Value, k.Line)
		}
		seen[f] = k
	}
	return nil
}

// scalar writes a YAML scalar as the JSON value of its resolved type.
// Decimal integers and true and false are written as they are, without a
// decoder per value (Node.Decode would read them the same).
func (w *jsonWriter) scalar(n *yaml.Node) error {
	switch n.Tag {
	case "!!null":
		w.b = append(w.b, "null"...)
	case "!!bool":
		if n.Value == "true" || n.Value == "false" {
			w.b = append(w.b, n.Value...)
			break
		}
		var v bool
		if err := n.Decode(&v); err != nil {
			return &lineError{Line: n.Line, Msg: "YAML: " + err.Error()}
		}
		w.b = strconv.AppendBool(w.b, v)
	case "!!int":
		if isDecimal(n.Value) {
			if v, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
				w.b = strconv.AppendInt(w.b, v, 10)
				break
			}
		}
		var v int64
		if err := n.Decode(&v); err != nil {
			return &lineError{Line: n.Line, Msg: fmt.Sprintf("YAML: %q is not an integer lvsctl reads", n.Value)}
		}
		w.b = strconv.AppendInt(w.b, v, 10)
	case "!!float":
		var v float64
		if err := n.Decode(&v); err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			return &lineError{Line: n.Line, Msg: fmt.Sprintf("YAML: %q is not a number lvsctl reads", n.Value)}
		}
		w.b = strconv.AppendFloat(w.b, v, 'g', -1, 64)
	default: // !!str, !!timestamp, !!binary: their text
		w.b = jsonstr.Append(w.b, n.Value)
	}
	return nil
}

// isDecimal reports whether s is an optional minus sign and digits
// without a leading zero (or just "0"): a YAML integer that means what
// its digits say in base 10 (a leading 0 makes an octal in YAML 1.1).
func isDecimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || s[0] == '0' && len(s) > 1 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
