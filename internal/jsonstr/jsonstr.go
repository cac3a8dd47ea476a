// Package jsonstr appends strings as encoding/json writes them.
//
// It costs a copy for the plain ones, so that a hand-written encoder (the
// YAML reader's JSON, lvsctl run's record) writes byte for byte what
// json.Marshal would.
package jsonstr

import "encoding/json"

// Append appends s as json.Marshal writes it. Printable ASCII is written
// here, with " and \ escaped by a backslash and < > & as \u003c, \u003e
// and \u0026, as Marshal does; a string with any other byte goes through
// Marshal.
func Append(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		var esc string
		switch s[i] {
		case '"':
			esc = `\"`
		case '\\':
			esc = `\\`
		case '<':
			esc = `\u003c`
		case '>':
			esc = `\u003e`
		case '&':
			esc = `\u0026`
		default:
			continue
		}
		b = append(b, s[start:i]...)
		b = append(b, esc...)
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
