package clitable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// tablewriterOutput is what tablewriter alone renders.
func tablewriterOutput(t *testing.T, header []string, rows [][]string) string {
	t.Helper()
	var b bytes.Buffer
	if err := writeTablewriter(&b, header, rows); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWriteMatchesTablewriter: for random tables, plain or not, Write
// prints what tablewriter prints.
func TestWriteMatchesTablewriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	alphabet := []string{"a", "Z", "0", ":", ".", "-", "[", "]", ",", " ", "|", "+", "~", "é", "中", "\t"}
	word := func(plainOnly bool) string {
		var b strings.Builder
		for range rng.IntN(12) {
			c := alphabet[rng.IntN(len(alphabet))]
			if plainOnly && (c == "é" || c == "中" || c == "\t") {
				c = "x"
			}
			b.WriteString(c)
		}
		return b.String()
	}
	plainTables := 0
	for round := range 500 {
		plainOnly := round%4 != 0
		cols := 1 + rng.IntN(6)
		header := make([]string, cols)
		for i := range header {
			header[i] = strings.ToUpper(word(true))
			if header[i] == "" || strings.TrimSpace(header[i]) != header[i] {
				header[i] = fmt.Sprintf("COL%d", i)
			}
		}
		var rows [][]string
		for range rng.IntN(8) {
			row := make([]string, cols)
			for i := range row {
				row[i] = word(plainOnly)
			}
			rows = append(rows, row)
		}
		if plain(header, rows) {
			plainTables++
		}
		var got bytes.Buffer
		if err := Write(&got, header, rows); err != nil {
			t.Fatal(err)
		}
		if want := tablewriterOutput(t, header, rows); got.String() != want {
			t.Fatalf("round %d: header %q rows %q:\nWrite:\n%s\ntablewriter:\n%s", round, header, rows, got.String(), want)
		}
	}
	if plainTables < 100 {
		t.Errorf("only %d of 500 tables took the plain path: the test proves little", plainTables)
	}
}

// BenchmarkWritePlan is a plan of 110,000 changes (a 10,000×10 table
// applied to an empty director).
func BenchmarkWritePlan(b *testing.B) {
	var rows [][]string
	for i := range 110000 {
		rows = append(rows, []string{"add-dest", fmt.Sprintf("TCP 10.0.%d.%d:80", i/250%250, i%250), fmt.Sprintf("192.168.%d.%d:80", i%10, i%250), "", "weight 1, masq"})
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := Write(&bytes.Buffer{}, []string{"ACTION", "SERVICE", "REAL SERVER", "FIELD", "CHANGE"}, rows); err != nil {
			b.Fatal(err)
		}
	}
}
