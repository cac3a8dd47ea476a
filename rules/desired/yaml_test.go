package desired

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// yamlToJSONByMarshal is the converter yamlToJSON replaced, kept as its
// oracle: json.Marshal for each string and Node.Decode for each number.
func yamlToJSONByMarshal(data []byte) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(data, err)
	}
	w := &marshalWriter{line: 1}
	if len(root.Content) == 0 {
		return []byte("{}"), nil
	}
	if err := w.node(root.Content[0], 0); err != nil {
		return nil, err
	}
	return w.b.Bytes(), nil
}

// marshalWriter writes JSON, padding with newlines to keep YAML lines.
type marshalWriter struct {
	b    bytes.Buffer
	line int
}

func (w *marshalWriter) at(line int) {
	for w.line < line {
		w.b.WriteByte('\n')
		w.line++
	}
}

func (w *marshalWriter) node(n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return &lineError{Line: n.Line, Msg: "YAML: nested too deeply"}
	}
	w.at(n.Line)
	switch n.Kind {
	case yaml.AliasNode:
		return w.node(n.Alias, depth+1)
	case yaml.MappingNode:
		// A key given twice, as encoding/json matches keys to fields.
		for i := 2; i+1 < len(n.Content); i += 2 {
			for j := 0; j < i; j += 2 {
				a, b := n.Content[j], n.Content[i]
				if a.Kind == yaml.ScalarNode && b.Kind == yaml.ScalarNode && foldKey(a.Value) == foldKey(b.Value) {
					return repeatedKeyError(a.Value, a.Line, b.Value, b.Line)
				}
			}
		}
		w.b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "!!int") {
				return &lineError{Line: k.Line, Msg: "YAML: a key must be a name"}
			}
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.at(k.Line)
			key, _ := json.Marshal(k.Value)
			w.b.Write(key)
			w.b.WriteByte(':')
			if err := w.node(v, depth+1); err != nil {
				return err
			}
		}
		w.b.WriteByte('}')
	case yaml.SequenceNode:
		w.b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				w.b.WriteByte(',')
			}
			if err := w.node(c, depth+1); err != nil {
				return err
			}
		}
		w.b.WriteByte(']')
	case yaml.ScalarNode:
		return w.scalar(n)
	default:
		return &lineError{Line: n.Line, Msg: "YAML: unexpected node"}
	}
	return nil
}

// scalar writes a YAML scalar as the JSON value of its resolved type.
func (w *marshalWriter) scalar(n *yaml.Node) error {
	switch n.Tag {
	case "!!null":
		w.b.WriteString("null")
	case "!!bool":
		var v bool
		if err := n.Decode(&v); err != nil {
			return &lineError{Line: n.Line, Msg: "YAML: " + err.Error()}
		}
		w.b.WriteString(strconv.FormatBool(v))
	case "!!int":
		var v int64
		if err := n.Decode(&v); err != nil {
			return &lineError{Line: n.Line, Msg: fmt.Sprintf("YAML: %q is not an integer lvsctl reads", n.Value)}
		}
		w.b.WriteString(strconv.FormatInt(v, 10))
	case "!!float":
		var v float64
		if err := n.Decode(&v); err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			return &lineError{Line: n.Line, Msg: fmt.Sprintf("YAML: %q is not a number lvsctl reads", n.Value)}
		}
		w.b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	default: // !!str, !!timestamp, !!binary: their text
		s, _ := json.Marshal(n.Value)
		w.b.Write(s)
	}
	return nil
}

// yamlDocs are YAML documents for yamlToJSON: every kind of scalar, keys
// and strings that need escaping, anchors, nesting, errors.
func yamlDocs() []string {
	docs := []string{
		healthYAML,
		string(benchYAML(4, 3)),
		"",
		"# only a comment\n",
		"---\nversion: 2\n",
		"version: 2\nservices: []\n",
		"\"<key>\": 1\n\"a&b\": 2\n\"quo\\\"te\": 3\nk\u00e9y: 4\n1: one\n",
		"folded: >\n  a\n  b\n\nliteral: |\n  c\n  d\n\nnext: 1\n",
		`base: &b {type: tcp, interval: 3s}
services:
  - &svc
    protocol: tcp
    check: *b
    destinations: &ds
      - {address: 10.0.0.2, port: 80}
      - address: 10.0.0.3
        port: 80
  - *svc
  - {destinations: *ds}
list: &l [1, 2]
again: *l
`,
		`services:
  - [{a: 1}, [{b: 2}]]
  - {}
x:
  - {services: 1}
  - [{}, {}]
y: [{note: "services: [{"}]
checks:
  - service: -t 10.0.0.1:80
    destinations: [{address: 10.0.0.2}, {address: 10.0.0.3}]
Services: [{}]
"services ": [{}]
`,
		"services:\r\n  - {a: 1}\r\n  - b: 2\r\n    c: 3\r\n",
		"? [a, b]\n: 1\n",
		"? {a: 1}\n: 1\n",
		"{a: 1}: 2\n",
		"<<: {a: 1}\nb: 2\n",
		"a: !!set {x, y}\n",
		"a: !custom 5\n",
		"a: b: c\n",
		"version: 2\nservices:\n  - protocol: tcp\n   address: x\n",
		"a: *nowhere\n",
		"a: [\n",
	}
	for _, v := range []string{
		"0", "-0", "7", "-12", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
		"18446744073709551615", "99999999999999999999999", "017", "0o17", "-0o17", "0x1F", "0b101", "-0b11",
		"+5", "1_000", "00", "08", "-", "!!int \"12\"", "!!int 0x10", "!!int x", "!!int \"-3\"", "!!int 1.0",
		"true", "false", "True", "FALSE", "!!bool yes", "!!bool \"true\"", "!!bool false", "!!bool maybe",
		"1.5", "-0.25", "1e3", ".5", "!!float 3", "6.02e23", "1_0.5", ".nan", "!!float .inf", "-.inf",
		"~", "null", "Null", "", "!!null ''",
		`"a<b>&c"`, `'it''s'`, `"tab\there"`, `"quote\"back\\slash"`, `"line\nbreak"`, `"caf\u00e9"`,
		`"\u2028\u2029"`, `"\x7f\x01"`, `"\xff"`, "plain text", `"10.0.0.1"`, "'80'", "2001-12-14",
		"2001-12-14t21:59:43.10-05:00", "!!binary aGVsbG8=", `"<<"`, "!!str 5", "!!timestamp 2001-12-14",
	} {
		docs = append(docs, "v: "+v+"\n", "- "+v+"\n")
	}
	deep := "a: " + strings.Repeat("[", 70) + strings.Repeat("]", 70) + "\n"
	docs = append(docs, deep, "a: &x "+strings.Repeat("[", 40)+strings.Repeat("]", 40)+"\nb: [*x, [*x]]\n")
	return docs
}

// TestYAMLToJSONLikeMarshal: the writer writes the bytes, and gives the
// errors, the Marshal-based one did, and the entry lines entryLines finds
// in what it writes.
func TestYAMLToJSONLikeMarshal(t *testing.T) {
	for _, d := range yamlDocs() {
		want, wantErr := yamlToJSONByMarshal([]byte(d))
		got, lines, err := yamlToJSON([]byte(d), nil)
		if !reflect.DeepEqual(err, wantErr) {
			t.Errorf("error %v, want %v, of\n%s", err, wantErr, d)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("wrote\n%s\nwant\n%s\nof\n%s", got, want, d)
		}
		if err != nil {
			continue
		}
		if scanned := entryLinesByTokens(got); !slices.Equal(lines, scanned) {
			t.Errorf("entry lines %v, want %v, of\n%s", lines, scanned, got)
		}
	}
}

// FuzzYAMLToJSON holds yamlToJSON to the Marshal-based writer.
func FuzzYAMLToJSON(f *testing.F) {
	for _, d := range yamlDocs() {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.Count(data, []byte("*")) > 1 {
			// Two aliases can expand to 2^maxDepth values, in both.
			return
		}
		want, wantErr := yamlToJSONByMarshal(data)
		got, lines, err := yamlToJSON(data, nil)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !bytes.Equal(got, want) {
			t.Fatalf("wrote %q (error %v), want %q (error %v)", got, err, want, wantErr)
		}
		if err == nil && !slices.Equal(lines, entryLines(got)) {
			t.Fatalf("entry lines %v, want %v, of %q", lines, entryLines(got), got)
		}
	})
}
