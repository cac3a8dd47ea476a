package desired

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/rules"
)

const rich = `# comment lines and blank lines are skipped

-A -t 10.0.0.1:80 -s wrr -p 600 -M 255.255.255.0
-a -t 10.0.0.1:80 -r 192.168.1.2:80 -m -w 3 -x 100 -y 10
ipvsadm -a -t 10.0.0.1:80 -r 192.168.1.3 -g -w 0
-A -u [2001:db8::1]:53 -s mh -b mh-fallback,mh-port -o
-a -u [2001:db8::1]:53 -r [2001:db8:1::3]:53 -i -w 1 --tun-type gue --tun-port 6080 --tun-remcsum
-a -u [2001:db8::1]:53 -r [2001:db8:1::2]:53 -i -w 1 --tun-type gre --tun-csum
-A -f 7 -6 -s sh -b sh-port -p 60 -M 64
-a -f 7 -6 -r [2001:db8:1::9]:0 -g -w 2
-A -f 2147483648 -s rr
-a -f 2147483648 -r 10.0.0.9 -i -w 1
`

func TestTextToJSONAndBack(t *testing.T) {
	set, err := ReadText("rich", []byte(rich), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Services) != 4 || len(set.Services[0].Dests) != 2 || set.Services[0].Dests[1].Port != 80 {
		t.Fatalf("read %+v", set)
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, set, Counters{Conns: true, Stats: true, Rate: true}); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON("json", b.Bytes(), nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	// The same rules: a plan from one to the other is empty (mh order
	// aside, which JSON carries and text does not).
	if p := rules.Diff(asKernel(set), back, rules.DiffOptions{KeepMHOrder: true}); !p.InSync() {
		t.Errorf("text -> JSON -> set changed the rules: %+v\n%s", p.Changes, b.String())
	}
	if p := rules.Diff(asKernel(back), set, rules.DiffOptions{KeepMHOrder: true}); !p.InSync() {
		t.Errorf("JSON -> set differs from the text: %+v", p.Changes)
	}
	for _, want := range []string{`"fwmark": 2147483648`, `"checksum": "remcsum"`, `"netmask": "64"`, `"netmask": "255.255.255.0"`, `"one_packet": true`, `"upper_threshold": 100`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

// asKernel is a set as a kernel read would give it (destinations in list
// order, newest first, for the canonical order).
func asKernel(s *rules.Set) *rules.Set {
	out := &rules.Set{}
	for _, svc := range s.Services {
		c := svc
		c.Dests = append([]rules.Dest(nil), svc.Dests...)
		out.Services = append(out.Services, c)
	}
	return out
}

func TestErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"-A -t 10.0.0.1:80\n-a -t 10.0.0.1:80 -r 10.0.0.2 -w x\n", "f:2: illegal weight specified"},
		{"-A -t 10.0.0.1:80\n-E -t 10.0.0.1:80 -s rr\n", "f:2: only -A (add service) and -a (add server) lines describe a rule set, not edit-service"},
		{"-A -t 10.0.0.1:0\n", "f:1: Zero port specified for non-persistent service"},
		{"-A -t 10.0.0.1:80\xff\n", "f:1: not valid UTF-8"},
		{"{\"version\": 2, \"services\": []}", "f:1: JSON: version 2"},
		{"{\"version\": 1, \"services\": [\n{\"protocol\": \"tcp\", \"address\": \"10.0.0.1\", \"port\": 80, \"family\": \"inet\", \"scheduler\": \"rr\",\n\"persistence\": {\"timeout\": 0}, \"destinations\": []}]}", "f:2: invalid timeout value `0' specified"},
		{"{\"version\": 1, \"services\": [\n{\"protocol\": \"tcp\", \"address\": \"example.com\", \"port\": 80, \"family\": \"inet\", \"scheduler\": \"rr\", \"destinations\": []}]}", "f:2: service 1: address \"example.com\": not an IP address"},
		{"{\"version\": 1, \"services\": [\n{\"protocol\": \"tcp\", \"address\": \"10.0.0.1\", \"port\": 80,\n \"weight\": \"x\"}]}", "f:3: JSON: json: unknown field \"weight\""},
	} {
		_, err := Read("f", []byte(tc.text), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.want)
		}
	}
}
