package desired

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
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
// the YAML's lines. Anchors and aliases are expanded; keys must be
// strings. The YAML is parsed with go.yaml.in/yaml/v3
// (docs/decisions/0014-health-checks.md says why).
func yamlToJSON(data []byte) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(err)
	}
	w := &jsonWriter{line: 1}
	if len(root.Content) == 0 {
		return []byte("{}"), nil
	}
	if err := w.node(root.Content[0], 0); err != nil {
		return nil, err
	}
	return w.b.Bytes(), nil
}

// yamlError turns the parser's "yaml: line N: ..." into a LineError's parts.
func yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				return &LineError{Line: n, Msg: "YAML: " + strings.TrimSpace(rest[i+1:])}
			}
		}
	}
	return &LineError{Line: 1, Msg: "YAML: " + msg}
}

// jsonWriter writes JSON, padding with newlines to keep YAML lines.
type jsonWriter struct {
	b    bytes.Buffer
	line int
}

func (w *jsonWriter) at(line int) {
	for w.line < line {
		w.b.WriteByte('\n')
		w.line++
	}
}

// maxDepth bounds nesting (and alias expansion) of a document.
const maxDepth = 64

func (w *jsonWriter) node(n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return &LineError{Line: n.Line, Msg: "YAML: nested too deeply"}
	}
	w.at(n.Line)
	switch n.Kind {
	case yaml.AliasNode:
		return w.node(n.Alias, depth+1)
	case yaml.MappingNode:
		w.b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "!!int") {
				return &LineError{Line: k.Line, Msg: "YAML: a key must be a name"}
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
		return &LineError{Line: n.Line, Msg: "YAML: unexpected node"}
	}
	return nil
}

// scalar writes a YAML scalar as the JSON value of its resolved type.
func (w *jsonWriter) scalar(n *yaml.Node) error {
	switch n.Tag {
	case "!!null":
		w.b.WriteString("null")
	case "!!bool":
		var v bool
		if err := n.Decode(&v); err != nil {
			return &LineError{Line: n.Line, Msg: "YAML: " + err.Error()}
		}
		w.b.WriteString(strconv.FormatBool(v))
	case "!!int":
		var v int64
		if err := n.Decode(&v); err != nil {
			return &LineError{Line: n.Line, Msg: fmt.Sprintf("YAML: %q is not an integer lvsctl reads", n.Value)}
		}
		w.b.WriteString(strconv.FormatInt(v, 10))
	case "!!float":
		var v float64
		if err := n.Decode(&v); err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			return &LineError{Line: n.Line, Msg: fmt.Sprintf("YAML: %q is not a number lvsctl reads", n.Value)}
		}
		w.b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	default: // !!str, !!timestamp, !!binary: their text
		s, _ := json.Marshal(n.Value)
		w.b.Write(s)
	}
	return nil
}
