package packaging_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// maxSentenceWords is the longest sentence README.md and docs/*.md may
// hold; sentences are meant to be read in one breath, well under it.
const maxSentenceWords = 60

// proseDocs are the pages held to maxSentenceWords: README.md and the pages
// of docs/, but not docs/reference/ (copied unchanged) nor the decision
// records in docs/decisions/.
func proseDocs(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, pages...)
}

// longSentences are sentences over maxSentenceWords still to be split,
// by page and their first words. The test fails on an entry that no
// longer matches a long sentence, so the list only shrinks.
var longSentences = map[string][]string{
	"docs/scale-out.md": {"Measured (2026-12-04, `make lab LAB_ARGS='-vms 1 -run TestECMP ./e2e'`, VM time 228 s): 1,000 UDP flows"},
}

var (
	linkTarget  = regexp.MustCompile(`\]\([^)]*\)`)
	sentenceEnd = regexp.MustCompile(`[.!?][)"'*_]*\s+`)
	blockStart  = regexp.MustCompile(`^\s*([-*+]|\d+\.)\s|^#|^>`)
)

// paragraphs returns a page's prose: its paragraphs, list items and
// headings, each joined into one line, without code blocks, tables or
// HTML comments.
func paragraphs(page string) []string {
	var out []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, " "))
			cur = nil
		}
	}
	fenced, comment := false, false
	for _, line := range strings.Split(page, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			flush()
			fenced = !fenced
			continue
		case fenced:
			continue
		case strings.HasPrefix(trimmed, "<!--"):
			flush()
			comment = !strings.Contains(trimmed, "-->")
			continue
		case comment:
			comment = !strings.Contains(trimmed, "-->")
			continue
		case trimmed == "" || strings.HasPrefix(trimmed, "|"):
			flush()
			continue
		case blockStart.MatchString(line):
			flush()
		}
		cur = append(cur, trimmed)
	}
	flush()
	return out
}

// sentences splits a paragraph after each '.', '!' or '?' that a space
// follows, dropping that mark. Abbreviations ("e.g. ") split too, which
// only shortens.
func sentences(paragraph string) []string {
	p := linkTarget.ReplaceAllString(paragraph, "]")
	var out []string
	for _, s := range sentenceEnd.Split(p, -1) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// TestSentencesAreShort: no sentence of README.md or docs/*.md is over
// maxSentenceWords words.
func TestSentencesAreShort(t *testing.T) {
	total, over40 := 0, 0
	known := map[string]bool{}
	for _, name := range proseDocs(t) {
		text, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		page := strings.TrimPrefix(name, "../")
		for _, p := range paragraphs(string(text)) {
			for _, s := range sentences(p) {
				n := len(strings.Fields(s))
				total++
				if n > 40 {
					over40++
				}
				if n <= maxSentenceWords {
					continue
				}
				if p := allowedPrefix(page, s); p != "" {
					known[page+": "+p] = true
					continue
				}
				t.Errorf("%s: a sentence of %d words (at most %d): %q", page, n, maxSentenceWords, s)
			}
		}
	}
	for page, prefixes := range longSentences {
		for _, p := range prefixes {
			if !known[page+": "+p] {
				t.Errorf("%s: no long sentence starts %q any more: remove it from longSentences", page, p)
			}
		}
	}
	if total < 500 {
		t.Errorf("found only %d sentences: the reading is broken", total)
	}
	t.Logf("%d sentences, %d over 40 words", total, over40)
}

// allowedPrefix is the entry of longSentences that s starts with, or "".
func allowedPrefix(page, s string) string {
	for _, p := range longSentences[page] {
		if strings.HasPrefix(s, p) {
			return p
		}
	}
	return ""
}

// TestSentenceReading: code blocks, tables and comments are left out, list
// items stand alone, and link targets are not words.
func TestSentenceReading(t *testing.T) {
	page := "# Title\n\nOne two. Three\nfour (five).\n\n```sh\nnot. prose.\n```\n\n| a. b. |\n|---|\n\n- an item\n- another [link](x/y.md). End\n<!-- a comment. -->\n"
	var got []string
	for _, p := range paragraphs(page) {
		got = append(got, sentences(p)...)
	}
	want := []string{"# Title", "One two", "Three four (five).", "- an item", "- another [link]", "End"}
	if !slices.Equal(got, want) {
		t.Errorf("sentences %q, want %q", got, want)
	}
}
