package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocumentShowsTheResults: docs/benchmarks.md holds the tables of
// docs/benchmarks.json exactly as benchplot writes them, so the numbers
// behind the plot are in the document beside it and a results file
// changed without its document fails here.
func TestDocumentShowsTheResults(t *testing.T) {
	r, err := readResults("../../docs/benchmarks.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	var tables bytes.Buffer
	r.Markdown(&tables)
	want, err := withTables(doc, tables.Bytes())
	if err != nil {
		t.Fatalf("docs/benchmarks.md: %v", err)
	}
	if !bytes.Equal(doc, want) {
		t.Error("docs/benchmarks.md's tables are not those of docs/benchmarks.json: make bench-plot BENCH_PLOT_LOGS= writes them")
	}
}

func TestWithTables(t *testing.T) {
	doc := "# B\n\nbefore\n\n" + docBegin + "\n\nold\n\n" + docEnd + "\n\nafter\n"
	got, err := withTables([]byte(doc), []byte("new\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# B\n\nbefore\n\n" + docBegin + "\n\nnew\n\n" + docEnd + "\n\nafter\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	again, err := withTables(got, []byte("new\n\n"))
	if err != nil || !bytes.Equal(again, got) {
		t.Errorf("writing the same tables again changed the document (%v)", err)
	}
	for name, bad := range map[string]string{
		"no markers":     "# B\n\ntext\n",
		"no end":         docBegin + "\nold\n",
		"end first":      docEnd + "\nold\n" + docBegin + "\n",
		"two beginnings": docBegin + "\n" + docBegin + "\n" + docEnd + "\n",
	} {
		if out, err := withTables([]byte(bad), []byte("new\n")); err == nil {
			t.Errorf("%s: accepted, wrote %q", name, out)
		} else if !strings.Contains(err.Error(), "markers") {
			t.Errorf("%s: error %q does not name the markers", name, err)
		}
	}
}

// TestSideBySide reads a side-by-side line from a log and draws it; a log
// without one is an error.
func TestSideBySide(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "bench.log")
	line := `    keepalived_lab_test.go:1: keepalived-side-by-side: {"date":"2026-12-06","real_servers":10000,"interval_s":2,` +
		`"reload_s":{"keepalived":90,"run":0.4,"apply":0.35},"cpu_per_1000_probes_ms":{"keepalived":120,"run":60},` +
		`"peak_rss_kib":{"keepalived":50000,"run":30000},"lateness_p99_ms":{"keepalived":300,"run":3}}`
	if err := os.WriteFile(log, []byte("=== RUN\n"+line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ka.svg")
	if err := sideBySide(log, out); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "keepalived 2.2.7", "lvsctl run", "lvsctl apply", "Reload, 10000 real servers"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the plot lacks %q", want)
		}
	}
	if err := os.WriteFile(log, []byte("=== RUN\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sideBySide(log, out); err == nil || !strings.Contains(err.Error(), "no side-by-side results") {
		t.Errorf("a log without results: %v", err)
	}
}
