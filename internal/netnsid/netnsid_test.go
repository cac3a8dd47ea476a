package netnsid

import "testing"

// The cookie names the namespace, not the thread or the call: two reads in
// one namespace agree.
func TestCookieIsStable(t *testing.T) {
	a, err := Cookie()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Cookie()
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("two reads in one namespace: %d then %d", a, b)
	}
}
