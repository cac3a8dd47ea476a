package lvsctl

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/rules/desired"
)

// TestDocsJSONExamplesParse: every JSON example of docs/lvsctl.md can be
// pasted: a desired-state document reads as one, and every other example
// decodes, with no unknown field, into one of the documents lvsctl
// writes.
func TestDocsJSONExamplesParse(t *testing.T) {
	doc, err := os.ReadFile("../docs/lvsctl.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, part := range strings.Split(string(doc), "```json\n")[1:] {
		end := strings.Index(part, "```")
		if end < 0 {
			t.Fatal("an unclosed ```json block")
		}
		example := []byte(part[:end])
		blocks++
		if bytes.Contains(example, []byte(`"version"`)) {
			set, err := desired.ReadJSON("example", example, nil)
			if err != nil || len(set.Services) == 0 {
				t.Errorf("example %d does not read as a desired state: %v\n%s", blocks, err, example)
			}
			continue
		}
		var status struct {
			Journal       string      `json:"journal"`
			PendingDrains []jsonDrain `json:"pending_drains"`
		}
		decoded := false
		for _, target := range []any{&jsonPlan{}, &jsonApply{}, &status} {
			dec := json.NewDecoder(bytes.NewReader(example))
			dec.DisallowUnknownFields()
			if dec.Decode(target) == nil {
				decoded = true
				break
			}
		}
		if !decoded {
			t.Errorf("example %d is none of plan, apply or status --json:\n%s", blocks, example)
		}
	}
	if blocks < 4 {
		t.Errorf("found %d JSON examples, want the schema and plan, apply and status", blocks)
	}
}
