package benchdata

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// SideBySideTag starts the log line that holds a SideBySide as JSON.
const SideBySideTag = "keepalived-side-by-side:"

// SideBySide is what the keepalived side-by-side measured (bench's
// TestKeepalivedSideBySide). The maps' keys are keepalived, run (lvsctl
// run) and apply (lvsctl apply of the same change).
type SideBySide struct {
	Date               string             `json:"date"`
	RealServers        int                `json:"real_servers"`
	Interval           float64            `json:"interval_s"`
	ReloadS            map[string]float64 `json:"reload_s"`
	CPUPer1000ProbesMS map[string]float64 `json:"cpu_per_1000_probes_ms"`
	PeakRSSKiB         map[string]int64   `json:"peak_rss_kib"`
	LatenessP99MS      map[string]float64 `json:"lateness_p99_ms"`
}

// ReadSideBySide returns the last SideBySide in a run's log, or a JSON
// file holding one.
func ReadSideBySide(r io.Reader) (SideBySide, error) {
	var s SideBySide
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(line, SideBySideTag); ok {
			line = strings.TrimSpace(after)
		} else if !strings.HasPrefix(line, "{") {
			continue
		}
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			return s, fmt.Errorf("side-by-side results: %v", err)
		}
		found = true
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	if !found || s.RealServers == 0 {
		return s, fmt.Errorf("no side-by-side results (a line %q)", SideBySideTag)
	}
	return s, nil
}
