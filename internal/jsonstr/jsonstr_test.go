package jsonstr

import (
	"encoding/json"
	"testing"
)

func TestAppendAsMarshal(t *testing.T) {
	for _, s := range []string{"", "plain text 1.2.3.4:80", `a"b\c`, "<&>", "tab\there", "é ü", "\u2028", "\xff bad", "ctl\x01"} {
		want, _ := json.Marshal(s)
		if got := Append([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("%q: %s, want %s", s, got[1:], want)
		}
	}
}

func FuzzAppendAsMarshal(f *testing.F) {
	f.Add("a<b")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := Append(nil, s); string(got) != string(want) {
			t.Errorf("%q: %s, want %s", s, got, want)
		}
	})
}
