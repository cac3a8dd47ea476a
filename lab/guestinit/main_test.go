//go:build linux

package main

import (
	"slices"
	"testing"
)

func TestEnvironAddsAndReplaces(t *testing.T) {
	env := environ([]string{"PATH=/opt/lvskit/bin:" + basePath, "FOO=bar"})
	if !slices.Contains(env, "PATH=/opt/lvskit/bin:"+basePath) || !slices.Contains(env, "FOO=bar") || !slices.Contains(env, "LVSKIT_LAB=1") {
		t.Errorf("environ = %v", env)
	}
	n := 0
	for _, kv := range env {
		if len(kv) > 5 && kv[:5] == "PATH=" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d PATH entries in %v", n, env)
	}
}
