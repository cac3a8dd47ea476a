package lvsctl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/gdamore/tcell/v2"
	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/lvsctl/internal/cliutil"
	"github.com/lvskit/lvskit/lvsctl/record"
	"github.com/lvskit/lvskit/lvsctl/top"
	"github.com/lvskit/lvskit/rules"
)

type topCmd struct {
	Batch      bool       `name:"batch" short:"b" help:"Print plain-text frames to stdout instead of the full-screen view (also without a terminal, or with TERM=dumb)."`
	Iterations iterations `name:"iterations" short:"n" default:"0" help:"Frames to print in batch mode, then exit; 0 prints until interrupted."`
	Delay      delay      `name:"delay" short:"d" default:"1s" help:"Time between refreshes (each reads the table once), at least 0.1s; a number is seconds."`
	JSON       bool       `name:"json" help:"Batch mode, one JSON document per frame: the fields of the list JSON with rates, and the states."`
	Filter     string     `name:"filter" placeholder:"TEXT" help:"Show only services or real servers whose address holds TEXT."`
	Sort       string     `name:"sort" default:"service" placeholder:"COLUMN" help:"Sort column: service, server, state, weight, active, inact, cps, inpps, outpps, inbps, outbps, fwd."`
	Reverse    bool       `name:"reverse" help:"Reverse the sort order."`
	journalFlag
}

// delay is a duration ("500ms", "2s") or a number of seconds ("2",
// "0.5"), as top(1)'s -d takes, of at least minDelay: the screen reads
// the table once a period, and a shorter one would read it without pause.
type delay time.Duration

// minDelay is the shortest period --delay and the screen's d take.
const minDelay = 100 * time.Millisecond

// Decode reads the flag's value itself: kong would take "-1" for a flag
// and say so, where the user wants to hear that a delay cannot be
// negative. kong prefixes the error with the flag's name.
func (d *delay) Decode(ctx *kong.DecodeContext) error {
	s, err := popValue(ctx, "seconds or a duration")
	if err != nil {
		return err
	}
	const want = "give seconds or a duration of at least 0.1s"
	v, err := strconv.ParseFloat(s, 64)
	if err == nil {
		v *= float64(time.Second)
	} else if dv, derr := time.ParseDuration(s); derr == nil {
		v, err = float64(dv), nil
	}
	switch {
	case err != nil || math.IsNaN(v):
		return fmt.Errorf("%q is neither seconds nor a duration; %s", s, want)
	case v < 0:
		return fmt.Errorf("%s is negative; %s", s, want)
	case v < float64(minDelay):
		return fmt.Errorf("%s is too short; %s", s, want)
	case v > float64(math.MaxInt64):
		return fmt.Errorf("%s is too long; %s", s, want)
	}
	*d = delay(time.Duration(v))
	return nil
}

// iterations is --iterations: 0 (until interrupted) or a number of frames.
type iterations int

// Decode reads the flag's value as delay's Decode does, so that "-n -1"
// is told it is negative rather than a flag.
func (n *iterations) Decode(ctx *kong.DecodeContext) error {
	s, err := popValue(ctx, "a number of frames")
	if err != nil {
		return err
	}
	const want = "give 0 (print until interrupted) or a number of frames"
	v, err := strconv.Atoi(s)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a whole number; %s", s, want)
	case v < 0:
		return fmt.Errorf("%s is negative; %s", s, want)
	}
	*n = iterations(v)
	return nil
}

// popValue takes a flag's value off kong's scanner, one that starts with
// a minus and a digit ("-1", "-.5s") too; another flag in its place
// ("-d -b") is a missing value.
func popValue(ctx *kong.DecodeContext, what string) (string, error) {
	t := ctx.Scan.Pop()
	if t.IsEOL() {
		return "", fmt.Errorf("no value; give %s", what)
	}
	s := fmt.Sprint(t.Value)
	if t.Type == kong.ShortFlagTailToken {
		s = strings.TrimPrefix(s, "=") // -d=2 as --delay=2
	}
	if !t.IsValue() {
		rest := strings.TrimPrefix(s, "-")
		if rest == s || rest == "" || !strings.ContainsRune("0123456789.", rune(rest[0])) {
			return "", fmt.Errorf("no value before %s; give %s", t, what)
		}
	}
	return s, nil
}

// topSource reads one frame: the journal's drains, lvsctl run's record,
// and the table: whole (as list --stats --rate reads it) when want asks,
// and at least every topFullEvery reads' time; otherwise the services
// (one dump, or with want.Only only those want names, one request each)
// with the real servers of those want names, the others' kept from the
// last read that had them. On a 10,000-service table the screen then
// reads a few services and their real servers a second instead of one
// dump of 10,000 services and 10,000 dumps of their real servers.
func (r *runner) topSource(client ipvs.Client) top.Source {
	var (
		cache    map[rules.ServiceKey][]rules.Dest
		last     *rules.Set
		lastFull time.Time
		lastDump time.Time // of the services, whole or not
		fullTook time.Duration
		dumpTook time.Duration
		run      recordCache
	)
	return func(want top.Want) (top.Input, error) {
		now := r.env.Now()
		var set *rules.Set
		var err error
		if want.Full || cache == nil || now.Sub(lastFull) >= max(topFullEvery, 10*fullTook) {
			start := time.Now()
			if set, err = rules.Read(client); err == nil {
				set.Sort() // frames list as list does; the screen orders itself
			}
			fullTook, lastFull, lastDump = time.Since(start), now, now
		} else if want.Only || now.Sub(lastDump) < max(topEstimatorPeriod, 10*dumpTook) {
			// The kernel's estimates, by which a dump would reorder the
			// services, have not moved since the last dump; or the dump
			// is slow (10,000 services on a slow processor), and reorders
			// at most a tenth of the time.
			set, err = last, readShown(client, want, last, cache)
		} else {
			start := time.Now()
			set, err = readSome(client, want, cache)
			dumpTook, lastDump = time.Since(start), now
		}
		if err != nil {
			last, cache = nil, nil // the next read is whole
			return top.Input{}, cliutil.ReadError(err)
		}
		if set != last {
			last = set
			cache = make(map[rules.ServiceKey][]rules.Dest, len(set.Services))
			for i := range set.Services {
				cache[rules.KeyOf(&set.Services[i].Service)] = set.Services[i].Dests
			}
		}
		in := top.Input{Set: set, Now: r.env.Now()}
		j, err := r.journal(false)
		if err != nil {
			return in, nil
		}
		defer j.Close()
		if jr, err := j.Load(); err == nil && jr != nil {
			in.Drains = jr.Drains
		}
		if st := run.load(j); st != nil {
			in.RunActive = st.Alive()
			in.Run, in.AllDown = run.health, st.AllDown
			for _, a := range st.Announce {
				in.Announce = append(in.Announce, top.Announcement(a))
			}
		}
		return in, nil
	}
}

// recordCache keeps lvsctl run's record between frames: it is read again
// only when the file changed (run rewrites it at each change of the
// table), not every frame: on a large table the record is megabytes of
// JSON (figures: decision 0015).
type recordCache struct {
	stat   unix.Stat_t
	st     *record.Run
	health map[string]top.Health
}

func (c *recordCache) load(j *record.Journal) *record.Run {
	var now unix.Stat_t
	if err := j.StatRun(&now); err != nil {
		c.st, c.health = nil, nil
		return nil
	}
	if c.st != nil && now.Ino == c.stat.Ino && now.Size == c.stat.Size && now.Mtim == c.stat.Mtim {
		return c.st
	}
	st, err := j.LoadRun()
	if err != nil || st == nil {
		c.st, c.health = nil, nil
		return nil
	}
	c.stat, c.st = now, st
	c.health = make(map[string]top.Health, len(st.Servers))
	for _, s := range st.Servers {
		_, dynamic := s.TableWeight()
		c.health[s.Service+" -r "+s.Destination] = top.Health{InService: s.InService, Check: s.Health.State.String(),
			Result: s.Result(), Weight: s.Weight, HasWeight: s.Weight > 0, Dynamic: dynamic}
	}
	return st
}

// topFullEvery is how often the screen reads every real server, for the
// totals and states of the services off screen; a slower whole read
// stretches it to ten times its duration.
const topFullEvery = 10 * time.Second

// topEstimatorPeriod is how often the kernel updates its rate estimates.
const topEstimatorPeriod = 2 * time.Second

// readSome reads the services, and the real servers of those want names
// or the cache lacks; the others keep the cache's.
func readSome(client ipvs.Client, want top.Want, cache map[rules.ServiceKey][]rules.Dest) (*rules.Set, error) {
	svcs, err := client.Services()
	if err != nil {
		return nil, err
	}
	set := &rules.Set{Services: make([]rules.Service, len(svcs))}
	for i := range svcs {
		svc := rules.Service{Service: svcs[i].Service, Stats: &svcs[i].Stats}
		key := rules.KeyOf(&svc.Service)
		ds, ok := cache[key]
		if !ok || want.Services[key] {
			entries, err := client.Destinations(svc.Service)
			if err != nil {
				return nil, err
			}
			ds = make([]rules.Dest, len(entries))
			for j := range entries {
				c := entries[j].DestCounters
				ds[j] = rules.Dest{Destination: entries[j].Destination, Counters: &c}
			}
		}
		svc.Dests = ds
		set.Services[i] = svc
	}
	return set, nil
}

// readShown reads again, in last itself and in cache, the services want
// names and their real servers, one request and one dump each; the
// others keep their figures, so that a refresh allocates little and the
// collector seldom runs. A service deleted meanwhile leaves; one added
// appears at the next dump.
func readShown(client ipvs.Client, want top.Want, last *rules.Set, cache map[rules.ServiceKey][]rules.Dest) error {
	kept := last.Services[:0]
	for _, svc := range last.Services {
		key := rules.KeyOf(&svc.Service)
		if want.Services[key] {
			e, err := client.Service(svc.Service)
			if errors.Is(err, unix.ESRCH) {
				delete(cache, key)
				continue
			}
			if err != nil {
				return err
			}
			entries, err := client.Destinations(e.Service)
			if err != nil {
				return err
			}
			svc = rules.Service{Service: e.Service, Stats: &e.Stats, Dests: make([]rules.Dest, len(entries))}
			for j := range entries {
				c := entries[j].DestCounters
				svc.Dests[j] = rules.Dest{Destination: entries[j].Destination, Counters: &c}
			}
			cache[key] = svc.Dests
		}
		kept = append(kept, svc)
	}
	clear(last.Services[len(kept):])
	last.Services = kept
	return nil
}

// top shows the live view, or prints frames in batch mode.
func (r *runner) top(c *topCmd) (int, error) {
	col, err := top.ParseColumn(c.Sort) // checked by Validate
	if err != nil {
		return exitUsage, cliutil.UsageError{Err: fmt.Errorf("--sort: %w", err), Help: true}
	}
	// A hang-up (the ssh session or the terminal gone) ends top as it
	// ends top(1); lvsctl's main catches SIGHUP for run's reload.
	ctx, cancel := context.WithCancel(r.env.Context)
	defer cancel()
	go func() {
		select {
		case <-r.env.Reload:
			cancel()
		case <-ctx.Done():
		}
	}()
	r.env.Context = ctx
	client, err := r.open()
	if err != nil {
		return exitFailed, err
	}
	defer client.Close()
	// top drops each read's table for the next: the default pace keeps
	// its memory near two tables.
	cliutil.LongRunning()
	m := top.NewModel(time.Duration(c.Delay))
	m.Sort, m.Reverse, m.Filter = col, c.Reverse, c.Filter
	src := r.topSource(client)
	if c.Batch || c.JSON || !r.env.Terminal || os.Getenv("TERM") == "dumb" {
		return r.topBatch(c, m, src)
	}
	scr, err := tcell.NewScreen()
	if err == nil {
		err = scr.Init()
	}
	if err != nil {
		return exitFailed, fmt.Errorf("cannot draw on this terminal (%v); lvsctl top -b prints frames", err)
	}
	defer scr.Fini()
	return exitOK, top.Run(r.env.Context, scr, m, src, top.ColorWanted(os.Getenv))
}

// topBatch prints frames as top -b does: --iterations of them (0: until
// interrupted), one every --delay.
func (r *runner) topBatch(c *topCmd, m *top.Model, src top.Source) (int, error) {
	for i := 0; c.Iterations == 0 || i < int(c.Iterations); i++ {
		if i > 0 {
			t := time.NewTimer(time.Duration(c.Delay))
			select {
			case <-r.env.Context.Done():
				t.Stop()
				return exitOK, nil
			case <-t.C:
			}
		}
		in, err := src(top.Want{Full: true})
		if err != nil {
			return exitFailed, err
		}
		m.Update(in)
		if c.JSON {
			err = m.WriteJSON(r.out)
		} else {
			err = m.WriteText(r.out)
		}
		if err != nil {
			return exitFailed, err
		}
	}
	return exitOK, nil
}
