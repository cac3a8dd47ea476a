// Package clitable renders the plain-ASCII tables that lvsprep and lvsctl
// print for people.
package clitable

import (
	"bufio"
	"io"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// Write renders a human-readable table in plain ASCII (it ends up in
// logs and terminals of every kind), headers as written, cells unwrapped.
//
// Tables of plain cells (printable ASCII, no blank at either end), which
// is every table of addresses and numbers, are rendered here, byte for
// byte as tablewriter renders them (TestWriteMatchesTablewriter):
// tablewriter takes seconds and hundreds of megabytes for a plan of
// 110,000 changes. Any other cell (wide characters, tabs, line breaks)
// goes to tablewriter, which knows how to measure and break it.
func Write(w io.Writer, header []string, rows [][]string) error {
	if plain(header, rows) {
		return writePlain(w, header, rows)
	}
	return writeTablewriter(w, header, rows)
}

// writeTablewriter renders the table with tablewriter in the house style.
func writeTablewriter(w io.Writer, header []string, rows [][]string) error {
	t := tablewriter.NewTable(w,
		tablewriter.WithSymbols(tw.NewSymbols(tw.StyleASCII)),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
	)
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	return t.Render()
}

// plain says whether every cell is printable ASCII without a blank at
// either end, and every row as wide as the header.
func plain(header []string, rows [][]string) bool {
	cell := func(s string) bool {
		if s != "" && (s[0] == ' ' || s[len(s)-1] == ' ') {
			return false
		}
		for i := 0; i < len(s); i++ {
			if s[i] < ' ' || s[i] > '~' {
				return false
			}
		}
		return true
	}
	for _, h := range header {
		if !cell(h) {
			return false
		}
	}
	for _, r := range rows {
		if len(r) != len(header) {
			return false
		}
		for _, c := range r {
			if !cell(c) {
				return false
			}
		}
	}
	return true
}

// writePlain renders plain cells: a rule, the header, a rule, the rows and
// a closing rule (none without rows), each cell left-aligned and padded
// to its column's widest cell with one space either side.
func writePlain(w io.Writer, header []string, rows [][]string) error {
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = len(h)
	}
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	var rule strings.Builder
	rule.WriteByte('+')
	for _, n := range widths {
		rule.WriteString(strings.Repeat("-", n+2))
		rule.WriteByte('+')
	}
	rule.WriteByte('\n')
	bw := bufio.NewWriterSize(w, 64<<10)
	line := func(cells []string) {
		bw.WriteByte('|')
		for i, c := range cells {
			bw.WriteByte(' ')
			bw.WriteString(c)
			for range widths[i] - len(c) + 1 {
				bw.WriteByte(' ')
			}
			bw.WriteByte('|')
		}
		bw.WriteByte('\n')
	}
	bw.WriteString(rule.String())
	line(header)
	bw.WriteString(rule.String())
	for _, r := range rows {
		line(r)
	}
	if len(rows) > 0 {
		bw.WriteString(rule.String())
	}
	return bw.Flush()
}
