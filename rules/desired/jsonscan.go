package desired

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// entryLines finds the line of each service, destination and check
// object of a JSON document: each object that opens directly within an
// array whose key is "services", "destinations" or "checks". data starts
// with a document that decoded without error, so it is read as valid
// JSON, in one pass over its bytes; what follows the document is not
// read. The key of an array is the last key before it, even for an array
// within an array, as the Token-based reader this replaces had it.
func entryLines(data []byte) lineTable {
	lines, _, _ := scanJSON(data, false, -1)
	return lines
}

// checkJSON is entryLines that also refuses an object that gives a key
// twice (see repeatedKeyError), in the same pass.
func checkJSON(data []byte) (lineTable, error) {
	lines, _, err := scanJSON(data, true, -1)
	return lines, err
}

// entryOffset is the offset of the '{' of entry n of data (counted as
// entryLines counts them), or -1.
func entryOffset(data []byte, n int) int {
	_, off, _ := scanJSON(data, false, n)
	return off
}

// jsonKey is a key of an open object: its quoted text, and whether that
// is ASCII without escapes (compared without unquoting).
type jsonKey struct {
	start, end int
	plain      bool
}

// scanJSON is entryLines; with keys, it stops at the first key an object
// repeats, with its error. With want >= 0, it stops at entry want and
// returns its offset (-1 when the document has fewer entries).
func scanJSON(data []byte, keys bool, want int) (lineTable, int, error) {
	var out lineTable
	// One byte per open object or array, saying which it is.
	const (
		object = iota
		array
		entries // an array whose key names entries
	)
	var stack []byte
	// With keys: the keys of the open objects, each object's from its
	// base on.
	var seen []jsonKey
	var bases []int
	// entryKey is whether the last key read, anywhere before, names
	// entries: an array takes the last key as its name, as in
	// `"services": [`, and so does an array within an array.
	entryKey := false
	// Offsets only grow: newlines are counted since the last entry, not
	// from the start each time.
	line, counted := 1, 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			end := stringEnd(data, i)
			k := end
			for k < len(data) && isJSONSpace(data[k]) {
				k++
			}
			if k < len(data) && data[k] == ':' {
				// "checks" names the entries of a checks document only:
				// a service's or real server's checks are no entries.
				kind := namesEntries(data[i:end])
				entryKey = kind == entryArray || kind == checksArray && len(stack) == 1
				if keys && len(bases) > 0 {
					key := jsonKey{i, end, isPlainKey(data[i:end])}
					for _, o := range seen[bases[len(bases)-1]:] {
						if sameJSONKey(data, o, key) {
							first, second := unquoteKey(data[o.start:o.end]), unquoteKey(data[i:end])
							return nil, -1, repeatedKeyError(first, lineAt(data, int64(o.start)), second, lineAt(data, int64(i)))
						}
					}
					seen = append(seen, key)
				}
			}
			i = end - 1
		case '{':
			if len(stack) > 0 && stack[len(stack)-1] == entries {
				if len(out) == want {
					return out, i, nil
				}
				line += bytes.Count(data[counted:i], []byte{'\n'})
				counted = i
				out = append(out, line)
			}
			stack = append(stack, object)
			if keys {
				bases = append(bases, len(seen))
			}
		case '[':
			if entryKey {
				stack = append(stack, entries)
			} else {
				stack = append(stack, array)
			}
		case '}', ']':
			if len(stack) <= 1 {
				return out, -1, nil // the document's end: what follows is not read
			}
			if keys && stack[len(stack)-1] == object {
				seen, bases = seen[:bases[len(bases)-1]], bases[:len(bases)-1]
			}
			stack = stack[:len(stack)-1]
		}
	}
	return out, -1, nil
}

// isPlainKey reports whether a quoted key is ASCII without escapes.
func isPlainKey(quoted []byte) bool {
	for _, c := range quoted {
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// sameJSONKey reports whether the keys a and b of data are one key to
// the decoder (sameKey).
func sameJSONKey(data []byte, a, b jsonKey) bool {
	if a.plain && b.plain {
		return a.end-a.start == b.end-b.start && asciiEqualFold(data[a.start:a.end], data[b.start:b.end])
	}
	return sameKey(unquoteKey(data[a.start:a.end]), unquoteKey(data[b.start:b.end]))
}

func asciiEqualFold(a, b []byte) bool {
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// unquoteKey is the text of a quoted JSON key.
func unquoteKey(quoted []byte) string {
	if len(quoted) >= 2 && bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1 : len(quoted)-1])
	}
	var s string
	if json.Unmarshal(quoted, &s) != nil {
		return string(quoted)
	}
	return s
}

// smallObject is the most keys an object has for its keys to be compared
// pair by pair rather than through a map.
const smallObject = 16

// sameKey reports whether the decoder takes keys a and b for the same
// field: it matches a key to a field's name as strings.EqualFold does, so
// "Port" after "port" replaces its value as a second "port" would. No
// object of the documents decodes into a map, where case would count.
func sameKey(a, b string) bool {
	// Folding maps an ASCII letter to an ASCII one: keys whose first
	// bytes are ASCII and differ, letter case aside, are other keys.
	if a != "" && b != "" && a[0] < utf8.RuneSelf && b[0] < utf8.RuneSelf && a[0]|0x20 != b[0]|0x20 {
		return false
	}
	return strings.EqualFold(a, b)
}

// foldKey is key folded as encoding/json folds names, equal for keys
// that sameKey takes for one: ASCII letters in upper case, other runes
// as the least rune of their case-folding orbit.
func foldKey(key string) string {
	b := make([]byte, 0, len(key))
	for _, r := range key {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			b = append(b, byte(r))
			continue
		}
		for {
			f := unicode.SimpleFold(r)
			if f <= r {
				r = f
				break
			}
			r = f
		}
		b = utf8.AppendRune(b, r)
	}
	return string(b)
}

// repeatedKeyError is the error of an object (a YAML mapping) that gives
// a key twice, at the second key's line: the decoder would keep the last
// value without a word.
func repeatedKeyError(first string, firstLine int, second string, secondLine int) error {
	msg := fmt.Sprintf("%q repeated: first on line %d", second, firstLine)
	if first != second {
		msg += fmt.Sprintf(" as %q", first)
	}
	return &lineError{Line: secondLine, Msg: msg}
}

// fieldLine is the line of the key at path within entry n of data (as
// entryLines counts them): of the last key of path found, each within the
// object the previous one holds, so the line of "check" when its
// "timeout" is not given; 0 when the entry or path[0] is not found. data
// is a document that decoded without error. For the messages of a failed
// read only.
func fieldLine(data []byte, n int, path ...string) int {
	off := entryOffset(data, n)
	if off < 0 {
		return 0
	}
	line := 0
	for _, name := range path {
		if i, ok := elementIndex(name); ok {
			// An element: its own line.
			if data[off] != '[' {
				break
			}
			v := -1
			eachElement(data, off, func(e int) bool {
				if i == 0 {
					v = e
				}
				i--
				return i >= 0
			})
			if v < 0 {
				break
			}
			line, off = lineAt(data, int64(v)), v
			continue
		}
		if data[off] != '{' {
			break
		}
		k, v := findKey(data, off, name)
		if k < 0 {
			break
		}
		line, off = lineAt(data, int64(k)), v
	}
	return line
}

// elementIndex reads a path element "[i]", an array's i-th element.
func elementIndex(name string) (int, bool) {
	if len(name) < 3 || name[0] != '[' || name[len(name)-1] != ']' {
		return 0, false
	}
	i, err := strconv.Atoi(name[1 : len(name)-1])
	return i, err == nil && i >= 0
}

// findKey finds key name in the object at data[off] ('{'): the offset of
// the key's quote and of its value; -1 for both when it is not there.
func findKey(data []byte, off int, name string) (int, int) {
	found, val := -1, -1
	eachMember(data, off, func(k, v int) bool {
		if sameKey(unquoteKey(data[k:stringEnd(data, k)]), name) {
			found, val = k, v
			return false
		}
		return true
	})
	return found, val
}

// eachMember calls fn with the offsets of the key and of the value of
// each member of the object at data[off] ('{'), in order, until fn
// returns false.
func eachMember(data []byte, off int, fn func(key, val int) bool) {
	i := skipSpace(data, off+1)
	for i < len(data) && data[i] == '"' {
		k := i
		i = skipSpace(data, stringEnd(data, i))
		if i >= len(data) || data[i] != ':' {
			return
		}
		v := skipSpace(data, i+1)
		if !fn(k, v) {
			return
		}
		i = skipSpace(data, skipValue(data, v))
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
}

// eachElement calls fn with the offset of each element of the array at
// data[off] ('['), in order, until fn returns false.
func eachElement(data []byte, off int, fn func(val int) bool) {
	i := skipSpace(data, off+1)
	for i < len(data) && data[i] != ']' {
		if !fn(i) {
			return
		}
		i = skipSpace(data, skipValue(data, i))
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && isJSONSpace(data[i]) {
		i++
	}
	return i
}

// skipValue is the offset just past the value at data[i].
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return i
	}
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				i = stringEnd(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(data) && !isJSONSpace(data[i]) && data[i] != ',' && data[i] != '}' && data[i] != ']' {
		i++
	}
	return i
}

// unknownFieldLine is the line of the first key, in document order, that
// names no field of the value of type t it is in: the one the decoder
// refuses (it reports the first). 0 when there is none named name.
func unknownFieldLine(data []byte, t reflect.Type, name string) int {
	if off := unknownField(data, skipSpace(data, 0), t, name); off >= 0 {
		return lineAt(data, int64(off))
	}
	return 0
}

func unknownField(data []byte, off int, t reflect.Type, name string) int {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if off >= len(data) {
		return -1
	}
	found := -1
	switch {
	case t.Kind() == reflect.Struct && data[off] == '{':
		eachMember(data, off, func(k, v int) bool {
			key := unquoteKey(data[k:stringEnd(data, k)])
			f, ok := fieldNamed(t, key)
			if !ok {
				if key == name {
					found = k
				}
				return found < 0
			}
			found = unknownField(data, v, f.Type, name)
			return found < 0
		})
	case t.Kind() == reflect.Slice && data[off] == '[':
		eachElement(data, off, func(v int) bool {
			found = unknownField(data, v, t.Elem(), name)
			return found < 0
		})
	}
	return found
}

// fieldNamed is the field of struct type t that the decoder sets for key.
func fieldNamed(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if sameKey(tag, key) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
