package run

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/desired"
)

// Series budget: 14 series per real server with one check (connections,
// packets and bytes in and out, active and inactive connections,
// configured and current weight, checks up, consecutive failures, each
// check up, draining; one more per further check), 6 per service, and
// about 40 for the checker: 150,000 for 10,000 real servers behind 1,000
// services. Labels are the service as ipvsadm writes it and the real
// server's address:port, never a probe's own details.
const metricsNamespace = "lvs"

var (
	serverLabels  = []string{"service", "real_server"}
	serviceLabels = []string{"service"}

	descServerConns    = desc("real_server_connections_total", "Connections scheduled to the real server.", serverLabels)
	descServerPackets  = desc("real_server_packets_total", "Packets to (in) and from (out) the real server.", append(serverLabels, "direction"))
	descServerBytes    = desc("real_server_bytes_total", "Bytes to (in) and from (out) the real server.", append(serverLabels, "direction"))
	descServerActive   = desc("real_server_active_connections", "Established connections of the real server.", serverLabels)
	descServerInactive = desc("real_server_inactive_connections", "Other connection entries of the real server.", serverLabels)
	descServerWeight   = desc("real_server_weight", "The real server's weight: configured in the file, current in the kernel.", append(serverLabels, "kind"))
	descServerUp       = desc("real_server_check_up", "1 when the real server's checks are all up, 0 when one is down or not yet known.", serverLabels)
	descServerFails    = desc("real_server_check_consecutive_failures", "Failed probes in a row (of the check that failed most).", serverLabels)
	descCheckUp        = desc("real_server_each_check_up", "1 when this check of the real server is up; check is its position in the file, from 1.", append(serverLabels, "check", "type"))
	descServerDraining = desc("real_server_draining", "1 while the real server drains after leaving the file.", serverLabels)
	descServiceConns   = desc("service_connections_total", "Connections scheduled by the service.", serviceLabels)
	descServicePackets = desc("service_packets_total", "Packets of the service, in and out.", append(serviceLabels, "direction"))
	descServiceBytes   = desc("service_bytes_total", "Bytes of the service, in and out.", append(serviceLabels, "direction"))
	descServiceAllDown = desc("service_all_real_servers_down", "1 when every real server of the service failed its check.", serviceLabels)
	descLatenessP99    = desc("checker_lateness_p99_seconds", "How late probes started over the last minutes, 99th percentile.", nil)
	descLatenessMax    = desc("checker_lateness_max_seconds", "The latest start of a probe over the last minutes.", nil)
	descOnTime         = desc("checker_on_time", "1 while probes keep to their schedule (the watchdog is fed).", nil)
)

func desc(name, help string, labels []string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, "", name), help, labels, nil)
}

// metrics is lvsctl run's Prometheus view: the kernel's counters, read
// with a client of its own at each scrape, and the run's health.
type metrics struct {
	open    func() (ipvs.Client, error)
	checker *health.Checker
	probes  *prometheus.HistogramVec

	mu        sync.Mutex
	pub       metricsState
	collectMu sync.Mutex // one scrape at a time reads the kernel
}

// checkKey is one check of a real server: its target's key and type.
type checkKey struct {
	key health.TargetKey
	typ string
}

// metricsState is what the run loop publishes after each change.
type metricsState struct {
	configured map[desired.DestRef]uint32
	keys       map[desired.DestRef][]checkKey
	draining   map[desired.DestRef]bool
	allDown    map[rules.ServiceKey]bool
}

func newMetrics(open func() (ipvs.Client, error)) *metrics {
	return &metrics{open: open, probes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Name: "probe_duration_seconds", Help: "Duration of health probes, by check type.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"type"})}
}

// observe records a probe's duration.
func (m *metrics) observe(t health.Target, took time.Duration, _ error) {
	m.probes.WithLabelValues(t.Spec.Type).Observe(took.Seconds())
}

// publish records the run's state for the next scrape.
func (m *metrics) publish(l *runLoop) {
	st := metricsState{configured: map[desired.DestRef]uint32{}, keys: map[desired.DestRef][]checkKey{},
		draining: map[desired.DestRef]bool{}, allDown: map[rules.ServiceKey]bool{}}
	for i := range l.want.Services {
		s := &l.want.Services[i]
		for _, d := range s.Dests {
			st.configured[desired.DestRef{Service: rules.KeyOf(&s.Service), Dest: rules.DestKeyOf(&d.Destination)}] = d.Weight
		}
	}
	for _, c := range l.probes {
		st.keys[c.ref] = append(st.keys[c.ref], checkKey{c.key, c.spec.Type})
	}
	for ref := range l.drains {
		st.draining[ref] = true
	}
	for k := range l.allDown {
		st.allDown[k] = true
	}
	m.mu.Lock()
	m.pub = st
	m.mu.Unlock()
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descServerConns, descServerPackets, descServerBytes, descServerActive, descServerInactive,
		descServerWeight, descServerUp, descServerFails, descCheckUp, descServerDraining, descServiceConns, descServicePackets,
		descServiceBytes, descServiceAllDown, descLatenessP99, descLatenessMax, descOnTime} {
		ch <- d
	}
	m.probes.Describe(ch)
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.collectMu.Lock()
	defer m.collectMu.Unlock()
	m.probes.Collect(ch)
	m.mu.Lock()
	st := m.pub
	m.mu.Unlock()
	states := map[health.TargetKey]health.TargetState{}
	if m.checker != nil {
		for _, t := range m.checker.Snapshot().Targets {
			states[t.Key] = t
		}
		lt := m.checker.Lateness()
		ch <- prometheus.MustNewConstMetric(descLatenessP99, prometheus.GaugeValue, lt.RecentP99.Seconds())
		ch <- prometheus.MustNewConstMetric(descLatenessMax, prometheus.GaugeValue, lt.RecentMax.Seconds())
		ch <- prometheus.MustNewConstMetric(descOnTime, prometheus.GaugeValue, b2f(m.checker.Healthy()))
	}
	c, err := m.open()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descServiceConns, err)
		return
	}
	defer c.Close()
	set, err := rules.Read(c)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descServiceConns, err)
		return
	}
	for i := range set.Services {
		s := &set.Services[i]
		if rules.IsProbeService(&s.Service) {
			continue
		}
		sk := rules.KeyOf(&s.Service)
		svc := sk.String()
		ss := s.KernelStats()
		counters(ch, descServiceConns, descServicePackets, descServiceBytes, &ss, svc)
		ch <- prometheus.MustNewConstMetric(descServiceAllDown, prometheus.GaugeValue, b2f(st.allDown[sk]), svc)
		for j := range s.Dests {
			d := &s.Dests[j]
			ref := desired.DestRef{Service: sk, Dest: rules.DestKeyOf(&d.Destination)}
			rs := ref.Dest.String()
			n := d.KernelCounters()
			counters(ch, descServerConns, descServerPackets, descServerBytes, &n.Stats, svc, rs)
			ch <- prometheus.MustNewConstMetric(descServerActive, prometheus.GaugeValue, float64(n.ActiveConns), svc, rs)
			ch <- prometheus.MustNewConstMetric(descServerInactive, prometheus.GaugeValue, float64(n.InactConns), svc, rs)
			ch <- prometheus.MustNewConstMetric(descServerWeight, prometheus.GaugeValue, float64(d.Weight), svc, rs, "current")
			if w, ok := st.configured[ref]; ok {
				ch <- prometheus.MustNewConstMetric(descServerWeight, prometheus.GaugeValue, float64(w), svc, rs, "configured")
			}
			if ks, ok := st.keys[ref]; ok {
				up, fails := true, 0
				for n, k := range ks {
					ts := states[k.key]
					up, fails = up && ts.State == health.Up, max(fails, ts.Fails)
					ch <- prometheus.MustNewConstMetric(descCheckUp, prometheus.GaugeValue, b2f(ts.State == health.Up), svc, rs, strconv.Itoa(n+1), k.typ)
				}
				ch <- prometheus.MustNewConstMetric(descServerUp, prometheus.GaugeValue, b2f(up), svc, rs)
				ch <- prometheus.MustNewConstMetric(descServerFails, prometheus.GaugeValue, float64(fails), svc, rs)
			}
			ch <- prometheus.MustNewConstMetric(descServerDraining, prometheus.GaugeValue, b2f(st.draining[ref]), svc, rs)
		}
	}
}

// counters sends a service's or real server's traffic counters.
func counters(ch chan<- prometheus.Metric, conns, packets, bytes *prometheus.Desc, s *ipvs.Stats, labels ...string) {
	in, out := append(labels[:len(labels):len(labels)], "in"), append(labels[:len(labels):len(labels)], "out")
	ch <- prometheus.MustNewConstMetric(conns, prometheus.CounterValue, float64(s.Conns), labels...)
	ch <- prometheus.MustNewConstMetric(packets, prometheus.CounterValue, float64(s.InPkts), in...)
	ch <- prometheus.MustNewConstMetric(packets, prometheus.CounterValue, float64(s.OutPkts), out...)
	ch <- prometheus.MustNewConstMetric(bytes, prometheus.CounterValue, float64(s.InBytes), in...)
	ch <- prometheus.MustNewConstMetric(bytes, prometheus.CounterValue, float64(s.OutBytes), out...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// serve listens on addr and serves the metrics at /metrics until ctx ends.
func (m *metrics) serve(ctx context.Context, addr string) (net.Addr, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(m); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ln.Close()
		}
	}()
	return ln.Addr(), nil
}
