package keepalived

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteYAML writes r's document as YAML that rules/desired.Read reads: a
// header comment naming the source, the notices that concern no service,
// then each service (as a JSON flow mapping, which is YAML) after a
// comment line for each notice that concerns it.
func WriteYAML(w io.Writer, r *Result) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# Desired state for lvsctl run, converted from the keepalived configuration %s.\n", oneLine(r.Source))
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
		for _, n := range bySvc[i] {
			writeNotice(bw, "  ", n)
		}
		b, err := json.MarshalIndent(s, "    ", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(bw, "  - %s\n", b)
	}
	return bw.Flush()
}

func writeNotice(bw *bufio.Writer, indent string, n Notice) {
	kind := "note"
	if n.Lossy {
		kind = "CHANGED"
	}
	fmt.Fprintf(bw, "%s# %s: %s\n", indent, kind, oneLine(n.String()))
}

// oneLine keeps a comment on its line.
func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}
