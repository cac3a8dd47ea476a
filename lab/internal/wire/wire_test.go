package wire

import (
	"bytes"
	"io"
	"testing"
)

func TestRecordsRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString("\x1b[2Jnoise before\n")
	WriteRecord(&buf, KindInit, "2.50")
	WriteRecord(&buf, KindBegin, "0")
	// payloads are exact: no trailing newline, embedded record prefix, CR
	WriteData(&buf, KindOut, 0, []byte("partial line\r\n\x01LAB done\nno newline"))
	WriteData(&buf, KindErr, 0, nil)
	WriteRecord(&buf, KindEnd, "0", "3", "120", "ok")
	WriteRecord(&buf, KindFatal, "load", "module", "x:", "no", "such", "file")
	WriteRecord(&buf, KindDone)

	r := NewReader(&buf)
	var got []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rec)
	}
	if len(got) != 7 {
		t.Fatalf("got %d records: %+v", len(got), got)
	}
	if got[0].Kind != KindInit || got[0].Fields[0] != "2.50" {
		t.Errorf("init record %+v", got[0])
	}
	if string(got[2].Payload) != "partial line\r\n\x01LAB done\nno newline" {
		t.Errorf("out payload %q", got[2].Payload)
	}
	if got[3].Kind != KindErr || len(got[3].Payload) != 0 {
		t.Errorf("empty err record %+v", got[3])
	}
	if i, err := got[4].Step(); err != nil || i != 0 || got[4].Fields[1] != "3" {
		t.Errorf("end record %+v", got[4])
	}
	if got[5].Rest() != "load module x: no such file" {
		t.Errorf("fatal message %q", got[5].Rest())
	}
	if got[6].Kind != KindDone {
		t.Errorf("last record %+v", got[6])
	}
	if r.Junk.String() != "\x1b[2Jnoise before\n" {
		t.Errorf("junk %q", r.Junk.String())
	}
}

func TestTruncatedPayloadIsAnError(t *testing.T) {
	var buf bytes.Buffer
	WriteData(&buf, KindOut, 1, []byte("0123456789"))
	r := NewReader(bytes.NewReader(buf.Bytes()[:buf.Len()-3]))
	if _, err := r.Next(); err == nil || err == io.EOF {
		t.Fatalf("truncated record: err = %v", err)
	}
}
