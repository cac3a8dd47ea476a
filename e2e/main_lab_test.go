//go:build lab

package e2e

import (
	"os"
	"testing"
)

// TestMain lets the test binary double as the helper programs: started with
// RoleEnv set (on a simulated host, via ip netns exec) it runs that role
// instead of the tests.
func TestMain(m *testing.M) {
	if role := os.Getenv(RoleEnv); role != "" {
		os.Exit(runRoleStatus(role, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
