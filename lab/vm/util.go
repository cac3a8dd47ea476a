package vm

import (
	"bufio"
	"encoding/json"
	"io"
)

func jsonMarshal(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func newBufferedWriter(w io.Writer) *bufio.Writer { return bufio.NewWriterSize(w, 1<<20) }
