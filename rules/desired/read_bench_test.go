package desired

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func benchYAML(services, dests int) []byte {
	var b strings.Builder
	b.WriteString("version: 2\nservices:\n")
	for i := 0; i < services; i++ {
		fmt.Fprintf(&b, "  - {protocol: tcp, address: 10.100.%d.%d, port: 80, scheduler: wrr,\n     check: {type: tcp, interval: 20s, timeout: 5s},\n     destinations: [\n", i/250, i%250+1)
		for k := 0; k < dests; k++ {
			fmt.Fprintf(&b, "       {address: 10.200.%d.%d, port: %d, method: masq, weight: 1},\n", k, i%250+1, 8000+i/250)
		}
		b.WriteString("     ]}\n")
	}
	return []byte(b.String())
}

func BenchmarkReadYAML(b *testing.B) {
	data := benchYAML(1000, 10)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Read("bench.yaml", bytes.NewReader(data), nil); err != nil {
			b.Fatal(err)
		}
	}
}

// benchJSON is benchYAML's document as JSON, one entry a line.
func benchJSON(services, dests int) []byte {
	var b strings.Builder
	b.WriteString("{\"version\": 2, \"services\": [\n")
	for i := 0; i < services; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "  {\"protocol\": \"tcp\", \"address\": \"10.100.%d.%d\", \"port\": 80, \"scheduler\": \"wrr\",\n   \"check\": {\"type\": \"tcp\", \"interval\": \"20s\", \"timeout\": \"5s\"},\n   \"destinations\": [\n", i/250, i%250+1)
		for k := 0; k < dests; k++ {
			sep := ","
			if k == dests-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "     {\"address\": \"10.200.%d.%d\", \"port\": %d, \"method\": \"masq\", \"weight\": 1}%s\n", k, i%250+1, 8000+i/250, sep)
		}
		b.WriteString("   ]}")
	}
	b.WriteString("\n]}\n")
	return []byte(b.String())
}

func BenchmarkReadJSON(b *testing.B) {
	data := benchJSON(1000, 10)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Read("bench.json", bytes.NewReader(data), nil); err != nil {
			b.Fatal(err)
		}
	}
}
