package health

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// listenersEnv makes the test binary a helper that serves TCP on that many
// ports of 127.0.0.1 (accepting and closing), prints them on one line and
// serves until its stdin closes: the benchmark's servers, outside the
// process whose CPU time it measures.
const listenersEnv = "LVSKIT_HEALTH_TEST_LISTENERS"

func TestMain(m *testing.M) {
	if n := os.Getenv(listenersEnv); n != "" {
		os.Exit(serveListeners(n))
	}
	os.Exit(m.Run())
}

func serveListeners(count string) int {
	n, err := strconv.Atoi(count)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ports := make([]string, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ports = append(ports, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	fmt.Println(strings.Join(ports, ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// startListeners runs the helper with n listeners and returns their ports.
func startListeners(tb testing.TB, n int) []uint16 {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), listenersEnv+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("listener helper: %v", err)
	}
	var ports []uint16
	for p := range strings.SplitSeq(strings.TrimSpace(line), ",") {
		v, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			tb.Fatalf("listener helper printed %q", line)
		}
		ports = append(ports, uint16(v))
	}
	if len(ports) != n {
		tb.Fatalf("listener helper serves %d ports, want %d", len(ports), n)
	}
	return ports
}
