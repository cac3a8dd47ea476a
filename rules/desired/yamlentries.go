package desired

import (
	"bytes"

	"go.yaml.in/yaml/v3"
)

// A large YAML document parsed at once is a tree of many times its size
// (figures: decision 0013). Its services are a
// block sequence at the top level whose entries stand alone, so
// yamlToJSON parses them one at a time, each at its own indentation, and
// the rest of the document (its "skeleton") on its own. With a YAMLCache,
// an entry whose text a previous read saw is not parsed again: a reload
// that changes one service parses one.
//
// Only a plain form is read by entries: a "services:" key at the start
// of a line, followed by a block sequence; no anchor, alias, tag or
// directive in the document; every entry parses alone as a sequence of
// one. Anything else, and any error, is read whole, as before, and
// reports what the whole document's parse reports: the two ways agree on
// every document the entries' way reads (FuzzYAMLEntries).

// YAMLCache keeps the JSON of the service entries of YAML documents by
// their text, and each entry decoded, for the next read of the same
// file. It holds the entries of the last document read with it. Not safe
// for concurrent use.
type YAMLCache struct {
	entries map[string]*entryJSON
	// Of the last read, when it went by entries: its entries in order,
	// and where their array is in its JSON.
	order []*entryJSON
	span  [2]int
}

// entryJSON is one entry as yamlToJSON writes it, lines counted from the
// entry's first line (1), and decoded once it has been read.
type entryJSON struct {
	b     []byte
	lines lineTable // entry lines, relative
	last  int       // the line the JSON ends on, relative
	svc   *JSONService
}

// servicesBlock is where the services' entries are in a document.
type servicesBlock struct {
	keyLine int   // the "services:" key's line
	starts  []int // each entry's first byte
	lines   []int // and its line
	end     int   // the byte after the last entry
}

// findServices finds the services block of data in the plain form; ok is
// false otherwise.
func findServices(data []byte) (sb servicesBlock, ok bool) {
	if hasByte(data, "&*!") {
		return sb, false // perhaps an anchor, alias or tag: read whole
	}
	// Lines end at "\n" here; the parser also ends them at a lone "\r" and
	// at NEL, LS and PS (whose UTF-8 starts with 0xc2 or 0xe2).
	if bytes.Count(data, []byte("\r")) != bytes.Count(data, []byte("\r\n")) ||
		hasByte(data, "\xc2\xe2") && bytes.ContainsAny(data, "\u0085\u2028\u2029") {
		return sb, false
	}
	indent := -1     // the entries' indentation, once found
	content := false // a line other than a comment was seen
	line := 0
	for off := 0; off < len(data); {
		line++
		next := len(data)
		if i := bytes.IndexByte(data[off:], '\n'); i >= 0 {
			next = off + i + 1
		}
		text := bytes.TrimRight(data[off:next], "\r\n")
		body := bytes.TrimLeft(text, " ")
		n := len(text) - len(body)
		switch {
		case len(body) > 0 && body[0] == '\t':
			return sb, false
		case n == 0 && string(body) == "---" && !content:
			// the document's start
		case n == 0 && (bytes.HasPrefix(body, []byte("---")) || bytes.HasPrefix(body, []byte("...")) || bytes.HasPrefix(body, []byte("%"))):
			return sb, false // directives, several documents
		case len(body) == 0 || body[0] == '#':
			// blank or a comment: part of what it follows
		case sb.keyLine == 0:
			content = true
			if n == 0 && isServicesKey(body) {
				sb.keyLine = line
			}
		case indent < 0:
			// The first line after the key opens the first entry.
			if !isEntry(body) {
				return sb, false
			}
			indent = n
			sb.starts, sb.lines = append(sb.starts, off), append(sb.lines, line)
		case n > indent:
			// within the entry
		case n == indent && isEntry(body):
			sb.starts, sb.lines = append(sb.starts, off), append(sb.lines, line)
		case n < indent || n == 0:
			sb.end = off
			return sb, true
		default:
			return sb, false
		}
		off = next
	}
	if len(sb.starts) == 0 {
		return sb, false
	}
	sb.end = len(data)
	return sb, true
}

// hasByte reports whether data holds any of the bytes of set: on a large
// document, a few IndexByte calls take a small part of ContainsAny's time.
func hasByte(data []byte, set string) bool {
	for i := range len(set) {
		if bytes.IndexByte(data, set[i]) >= 0 {
			return true
		}
	}
	return false
}

// isServicesKey reports whether a line at column 0 is the services key
// with nothing after it but a comment.
func isServicesKey(body []byte) bool {
	rest, ok := bytes.CutPrefix(body, []byte("services"))
	if !ok {
		return false
	}
	rest = bytes.TrimLeft(rest, " ")
	if len(rest) == 0 || rest[0] != ':' {
		return false
	}
	rest = bytes.TrimLeft(rest[1:], " ")
	return len(rest) == 0 || rest[0] == '#'
}

// isEntry reports whether an indented line opens a block sequence entry.
func isEntry(body []byte) bool {
	return body[0] == '-' && (len(body) == 1 || body[1] == ' ')
}

// yamlByEntries is yamlToJSON by entries; ok is false when data is not of
// the plain form, or any part of it does not parse: the caller reads it
// whole.
func yamlByEntries(data []byte, cache *YAMLCache) ([]byte, lineTable, bool) {
	sb, ok := findServices(data)
	if !ok {
		return nil, nil, false
	}
	// The skeleton keeps every line, with the entries' lines left empty.
	skel := make([]byte, 0, sb.starts[0]+len(data)-sb.end+(sb.lines[len(sb.lines)-1]-sb.lines[0])+64)
	skel = append(skel, data[:sb.starts[0]]...)
	for _, c := range data[sb.starts[0]:sb.end] {
		if c == '\n' {
			skel = append(skel, '\n')
		}
	}
	skel = append(skel, data[sb.end:]...)
	var root yaml.Node
	if yaml.Unmarshal(skel, &root) != nil || len(root.Content) != 1 {
		return nil, nil, false
	}
	seen := map[string]*entryJSON{}
	order := make([]*entryJSON, 0, len(sb.starts))
	var span [2]int
	w := &jsonWriter{b: make([]byte, 0, len(data)+len(data)/4+64), line: 1, lines: lineTable{}, entriesLine: sb.keyLine}
	w.entries = func() bool {
		w.at(sb.lines[0])
		span[0] = len(w.b)
		w.b = append(w.b, '[')
		for i, start := range sb.starts {
			end := sb.end
			if i+1 < len(sb.starts) {
				end = sb.starts[i+1]
			}
			text := data[start:end]
			e := seen[string(text)]
			if e == nil && cache != nil {
				e = cache.entries[string(text)]
			}
			if e == nil {
				if e = entryToJSON(text); e == nil {
					return false
				}
			}
			seen[string(text)] = e
			order = append(order, e)
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.at(sb.lines[i])
			w.b = append(w.b, e.b...)
			for _, l := range e.lines {
				w.lines = append(w.lines, sb.lines[i]+l-1)
			}
			w.line = sb.lines[i] + e.last - 1
		}
		w.b = append(w.b, ']')
		span[1] = len(w.b)
		return true
	}
	if err := w.node(root.Content[0], 0, false); err != nil || !w.wroteEntries {
		return nil, nil, false
	}
	if cache != nil {
		cache.entries, cache.order, cache.span = seen, order, span
	}
	return w.b, w.lines, true
}

// entryToJSON parses one entry's text alone; nil when it does not parse
// as a sequence of one, or its JSON cannot be written.
func entryToJSON(text []byte) *entryJSON {
	var root yaml.Node
	if yaml.Unmarshal(text, &root) != nil || len(root.Content) != 1 {
		return nil
	}
	seq := root.Content[0]
	// A service is a mapping; the whole document's writer is read for
	// anything else.
	if seq.Kind != yaml.SequenceNode || len(seq.Content) != 1 || seq.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	// As the whole document's writer is within the services' array.
	w := &jsonWriter{line: 1, lines: lineTable{}, entryKey: true}
	if w.node(seq.Content[0], 2, true) != nil { // at the depth it has in the document
		return nil
	}
	return &entryJSON{b: w.b, lines: w.lines, last: w.line}
}
