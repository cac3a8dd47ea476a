package keepalived

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// WriteYAML writes r's document as YAML that rules/desired.Read reads, in
// the style of docs/health.md: a header comment naming the source and the
// notices that concern no service, then each service as a block mapping
// after a comment naming its virtual_server line and one for each notice
// that concerns it; a check, a tunnel and each real server on one line
// (flow mappings). The same Result gives the same bytes.
func WriteYAML(w io.Writer, r *Result) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# Desired state for lvsctl run, converted from the keepalived configuration %s\n", oneLine(r.Source))
	fmt.Fprintf(bw, "# by lvsctl import keepalived. Comments name the keepalived lines.\n")
	bySvc := map[int][]Notice{}
	for _, n := range r.Notices {
		if n.Service < 0 || n.Service >= len(r.Document.Services) {
			writeNotice(bw, "", n)
			continue
		}
		bySvc[n.Service] = append(bySvc[n.Service], n)
	}
	fmt.Fprintf(bw, "version: %d\n", r.Document.Version)
	if len(r.Document.Services) == 0 {
		bw.WriteString("services: []\n")
		return bw.Flush()
	}
	bw.WriteString("services:\n")
	for i, s := range r.Document.Services {
		if i < len(r.Sources) && r.Sources[i] != nil {
			src := r.Sources[i]
			fmt.Fprintf(bw, "  # %s:%d: %s\n", filepath.Base(src.File), src.Line, oneLine(strings.Join(src.Words, " ")))
		}
		for _, n := range bySvc[i] {
			writeNotice(bw, "  ", n)
		}
		m, err := toMap(s)
		if err != nil {
			return err
		}
		// The real servers last, as docs/health.md writes a service.
		for j, x := range m {
			if x.key == "destinations" {
				m = append(append(m[:j:j], m[j+1:]...), x)
				break
			}
		}
		first := true
		for _, kv := range m {
			prefix := "    "
			if first {
				prefix, first = "  - ", false
			}
			switch v := kv.val.(type) {
			case []any:
				if kv.key == "destinations" {
					fmt.Fprintf(bw, "%s%s:\n", prefix, kv.key)
					for _, d := range v {
						fmt.Fprintf(bw, "      - %s\n", flow(d))
					}
					continue
				}
				fmt.Fprintf(bw, "%s%s: %s\n", prefix, kv.key, flow(v))
			default:
				fmt.Fprintf(bw, "%s%s: %s\n", prefix, kv.key, flow(v))
			}
		}
	}
	return bw.Flush()
}

func writeNotice(bw *bufio.Writer, indent string, n Notice) {
	kind := "note"
	switch {
	case n.Refused:
		kind = "REFUSED"
	case n.Lossy:
		kind = "CHANGED"
	}
	n.File = filepath.Base(n.File)
	fmt.Fprintf(bw, "%s# %s: %s\n", indent, kind, oneLine(n.String()))
}

// oneLine keeps a comment on its line.
func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}

// kv is one member of a JSON object, in the order encoding/json writes it.
type kv struct {
	key string
	val any
}

type object []kv

// toMap is v as encoding/json writes it, objects keeping their order.
func toMap(v any) (object, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	x, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	o, ok := x.(object)
	if !ok {
		return nil, fmt.Errorf("not an object: %s", b)
	}
	return o, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			var o object
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				o = append(o, kv{k.(string), v})
			}
			_, err := dec.Token()
			return o, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token()
			return a, err
		}
	}
	return t, nil
}

// flow writes a value on one line: scalars plain where YAML reads them
// back as the same string, else double-quoted (JSON's escapes are
// YAML's).
func flow(v any) string {
	switch v := v.(type) {
	case object:
		parts := make([]string, len(v))
		for i, m := range v {
			parts[i] = m.key + ": " + flow(m.val)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = flow(x)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case string:
		return scalar(v)
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

// plainSafe is text YAML reads back as this string in block and flow
// context: no indicator, no ": ", nothing that resolves to another type.
var plainSafe = regexp.MustCompile(`^[A-Za-z_/][A-Za-z0-9_./-]*$|^[0-9][0-9.]*[.][0-9.]*[0-9]$|^[0-9]+-[0-9]+$|^[0-9]+(\.[0-9]+)?(s|ms)$`)

var yamlWords = map[string]bool{"true": true, "false": true, "yes": true, "no": true, "on": true, "off": true, "null": true,
	"y": true, "n": true, "nan": true, "inf": true}

func scalar(s string) string {
	if plainSafe.MatchString(s) && !yamlWords[strings.ToLower(s)] && strings.Count(s, ".") != 1 {
		return s
	}
	if plainSafe.MatchString(s) && strings.Count(s, ".") == 1 && strings.IndexAny(s, "0123456789") != 0 {
		return s
	}
	b, _ := json.Marshal(s)
	return string(b)
}
