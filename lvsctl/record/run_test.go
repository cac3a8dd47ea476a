package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/internal/netnsid"
)

// TestRecordCheckType: the record names each server's check type; one
// written before it did has the type in the health state's target.
func TestRecordCheckType(t *testing.T) {
	for rec, want := range map[string]string{
		`{"service":"-t 10.0.0.1:80","destination":"192.168.1.1:80","check":"http","health":{"key":{"addr":"192.168.1.1:80","spec":"x"},"state":"up"}}`:                                           "http",
		`{"service":"-t 10.0.0.1:80","destination":"192.168.1.1:80","health":{"key":{"addr":"192.168.1.1:80","spec":"x"},"target":{"addr":"192.168.1.1:80","spec":{"type":"dns"}},"state":"up"}}`: "dns",
	} {
		var s Server
		if err := json.Unmarshal([]byte(rec), &s); err != nil {
			t.Fatal(err)
		}
		if got := s.CheckType(); got != want {
			t.Errorf("%s: check type %q, want %q", rec, got, want)
		}
		if b, _ := json.Marshal(Server{Check: "tcp"}); strings.Contains(string(b), `"target"`) {
			t.Errorf("a record without a target writes one: %s", b)
		}
	}
}

// The record written a server at a time is the record json.Marshal
// writes, less whitespace.
func TestRecordWritesAsMarshal(t *testing.T) {
	st := &Run{Version: runVersion, PID: 7, File: `/etc/"servers":null.yaml`, Marks: map[string]uint32{`"servers":null`: 1},
		AllDown: []string{"-t 10.0.0.1:80"}, Identity: netnsid.Identity{Boot: "b"}}
	for i := range 3 {
		st.Servers = append(st.Servers, Server{Service: "-t 10.0.0.1:80", Destination: fmt.Sprintf("192.168.1.%d:80", i), Weight: uint32(i), Check: "tcp",
			Health: health.TargetState{State: health.Down, Result: "connect: refused <&>"}})
	}
	for _, servers := range [][]Server{nil, st.Servers[:1], st.Servers} {
		st.Servers = servers
		var got bytes.Buffer
		if err := st.writeJSON(&got); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(st)
		var compact bytes.Buffer
		if err := json.Compact(&compact, got.Bytes()); err != nil {
			t.Fatalf("%v:\n%s", err, got.Bytes())
		}
		if servers == nil {
			want = bytes.Replace(want, []byte(`"servers":null`), []byte(`"servers":[]`), 1)
		}
		if !bytes.Equal(compact.Bytes(), want) || !bytes.HasSuffix(got.Bytes(), []byte("}\n")) {
			t.Errorf("%d servers: wrote\n%s\nwant\n%s", len(servers), got.Bytes(), want)
		}
		// Handed out one at a time, the same servers write the same.
		byEach := *st
		byEach.Servers = nil
		byEach.Each = func(yield func(*Server) bool) {
			for i := range servers {
				s := servers[i]
				if !yield(&s) {
					return
				}
			}
		}
		var each bytes.Buffer
		if err := byEach.writeJSON(&each); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(each.Bytes(), got.Bytes()) {
			t.Errorf("%d servers one at a time: wrote\n%s\nwant\n%s", len(servers), each.Bytes(), got.Bytes())
		}
	}
}

// TestRunServerJSONAsMarshal: the record's hand-written encoding of a
// server is json.Marshal's, field by field; a field added to Server,
// the health state or its key and not to appendJSON fails here.
func TestRunServerJSONAsMarshal(t *testing.T) {
	var shared specJSON
	check := func(name string, s Server) {
		t.Helper()
		want, err := json.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.appendJSON([]byte("x"), new(specJSON)); string(got) != "x"+string(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got[1:], want)
		}
		// With the spec kept: from the server before, then from itself.
		for range 2 {
			if got := s.appendJSON(nil, &shared); string(got) != string(want) {
				t.Errorf("%s, its spec kept:\n got %s\nwant %s", name, got, want)
			}
		}
	}
	check("zero", Server{})
	loc := time.FixedZone("x", 3600+1800)
	full := Server{Service: "-t [::1]:80 <&>", Destination: "[fe80::1]:80", InService: true, Weight: 5, Check: "tcp",
		Health: health.TargetState{
			Key:   health.TargetKey{Addr: netip.MustParseAddrPort("[fe80::1%eth0]:80"), Mark: 7, Spec: `{"type":"tcp"}`, Env: "A=b\x00C=d"},
			State: health.Down, Passes: 1, Fails: 2, Result: "connect: refused é\n",
			LastProbe: time.Date(2026, 12, 6, 1, 2, 3, 456789, loc), LastDuration: 1500 * time.Microsecond, LastLate: -3,
			LastChange: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		}}
	check("full", full)
	zero := uint32(0)
	withWeight := full
	withWeight.Health.Weight = &zero
	check("with a weight of 0", withWeight)
	withTarget := full
	withTarget.Health.Target = health.Target{Addr: netip.MustParseAddrPort("10.0.0.1:80"), Spec: health.Spec{Type: "tcp"}}
	check("with its target", withTarget)
	several := full
	several.SetChecks([]ServerCheck{{Check: "tcp", Health: health.TargetState{State: health.Up, Weight: &zero}}, {Check: "http", Health: full.Health}})
	if several.Check != "http" || len(several.Checks) != 2 {
		t.Errorf("SetChecks: the check %q decides, of %d, want http of 2", several.Check, len(several.Checks))
	}
	check("with two checks", several)
	// Each field alone.
	var walk func(path string, v reflect.Value, set func())
	walk = func(path string, v reflect.Value, set func()) {
		switch v.Interface().(type) {
		case time.Time:
			v.Set(reflect.ValueOf(time.Date(2026, 12, 6, 0, 0, 0, 1, time.UTC)))
		case netip.AddrPort:
			v.Set(reflect.ValueOf(netip.MustParseAddrPort("10.0.0.1:80")))
		case health.Target:
			return // written by Marshal, above
		case health.State:
			v.SetUint(uint64(health.Up))
		case *uint32:
			w := uint32(7)
			v.Set(reflect.ValueOf(&w))
		case []ServerCheck:
			// Two checks, each with its fields, the second with one
			// field set at a time.
			var c ServerCheck
			cv := reflect.ValueOf(&c).Elem()
			walk(path+"[1]", cv, func() {
				v.Set(reflect.ValueOf([]ServerCheck{full.AllChecks()[0], c}))
				set()
			})
			return
		default:
			switch v.Kind() {
			case reflect.Struct:
				for i := range v.NumField() {
					walk(path+"."+v.Type().Field(i).Name, v.Field(i), set)
				}
				return
			case reflect.String:
				v.SetString("a<b")
			case reflect.Bool:
				v.SetBool(true)
			case reflect.Int, reflect.Int64:
				v.SetInt(3)
			case reflect.Uint32, reflect.Uint8:
				v.SetUint(3)
			default:
				t.Fatalf("%s: a field of kind %s: teach this test and appendJSON", path, v.Kind())
			}
		}
		set()
		v.SetZero()
	}
	var one Server
	rv := reflect.ValueOf(&one).Elem()
	walk("Server", rv, func() { check("one field set", one) })
}
