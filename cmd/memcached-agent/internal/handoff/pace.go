package handoff

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// Pacing a copy into a destination with extstore (spec.extstore).
//
// memcached holds an item it takes in RAM until its flusher writes the
// value to disk; an item evicted from RAM before that is lost. A copy
// streams items at hundreds of MB/s, as fast as a flusher with the hook's
// flags keeps up with on an idle machine and faster than one that other
// work slows, or that a slow disk holds up: then an unpaced copy into a
// destination with a small -m and a large disk evicts items it has just
// written (issue #42; TestExtstoreCopy's unpaced copy lost up to a quarter
// of a working set four times -m on a loaded machine). So a copy into a destination whose stats say it has extstore
// keeps what it has written there and memcached has not flushed yet (its
// backlog: the value bytes it sent, of items large enough to be flushed,
// less the growth of the destination's extstore_bytes_written since the
// copy began) under a share of the destination's -m (limit_maxbytes),
// asking the destination again at most every poll while over it. It never
// waits for ever: when the destination flushes nothing for stall, or one
// wait lasts longest, it forgives the backlog, counts that, and goes on
// (a destination whose flusher waits for memory to be short, with
// itemAgeSeconds above 0, flushes only once the copy has filled its RAM).
// A destination without extstore is not paced.

// paceRule is how a copy paces itself by its destinations' flush.
type paceRule struct {
	// share of the destination's -m that the backlog may reach; 0
	// turns pacing off.
	share float64
	// poll is the shortest time between two stats of a destination.
	poll time.Duration
	// stall ends a wait in which the destination flushed nothing;
	// longest ends any one wait.
	stall, longest time.Duration
}

// defaultPace is the copy's: half of -m, the half that the headers of a
// full disk may not take (the hook refuses a disk whose headers would),
// which kept every item of a working set four times -m of 16 KiB values
// (TestExtstoreCopy); stats every 50 ms, a small part of a flush of half
// of -m at the rates measured; 2 s of no flush, a flusher that sleeps at
// most 10 ms (the hook's ext_max_sleep) or 1 s (memcached's) has had its
// chance.
var defaultPace = paceRule{share: 0.5, poll: 50 * time.Millisecond, stall: 2 * time.Second, longest: 10 * time.Second}

// paceCounts are what pacing did, added to a copy's counts.
type paceCounts struct {
	// waits is how many times the copy waited for a destination's
	// flush, and waited for how long in all (nanoseconds); gaveUp, how
	// many of those waits ended on the bound (stall, longest) rather
	// than with the destination caught up.
	waits, waited, gaveUp atomic.Int64
}

// summary says what pacing did, for the copy's report: "" when it never
// waited.
func (c *paceCounts) summary() string {
	n := c.waits.Load()
	if n == 0 {
		return ""
	}
	s := fmt.Sprintf("waited %.1f s for the destination's flush to disk (%d waits", time.Duration(c.waited.Load()).Seconds(), n)
	if g := c.gaveUp.Load(); g > 0 {
		s += fmt.Sprintf(", %d given up, the destination flushing too little", g)
	}
	s += ")"
	return s
}

// pacer paces the copy into one destination with extstore.
type pacer struct {
	// c asks the destination for its stats, on a connection of its own
	// (the destination's writer has its reader).
	c      *conn
	rule   paceRule
	counts *paceCounts
	// allowed is the backlog the copy may leave, in bytes; minSize,
	// ext_item_size: smaller items stay in RAM, and are not counted.
	allowed, minSize int64
	// sent is the value bytes sent since base was the destination's
	// extstore_bytes_written; written is what it said last, at polled.
	sent, base, written int64
	polled              time.Time
}

// destStats is what a destination's stats say of its extstore: ok false
// without one.
type destStats struct {
	ok                   bool
	limit, written, size int64
}

// probePace asks a destination on c whether it has extstore (stats,
// stats settings), and the numbers its pacer starts from.
func probePace(c *conn) (destStats, error) {
	st, err := stats(c, "stats")
	if err != nil {
		return destStats{}, err
	}
	written, ok := st["extstore_bytes_written"]
	if !ok {
		return destStats{}, nil
	}
	set, err := stats(c, "stats settings")
	if err != nil {
		return destStats{}, err
	}
	d := destStats{ok: true, limit: st["limit_maxbytes"], written: written, size: set["ext_item_size"]}
	return d, nil
}

// pacerFor paces the copy into the destination at addr, if it has
// extstore, on a connection of its own: it asks on the destination's
// writer's connection c, before its reader starts. nil: not paced.
func (a *attempt) pacerFor(c *conn, addr string) (*pacer, error) {
	cp := a.cp
	rule := defaultPace
	if cp.pace != nil {
		rule = *cp.pace
	}
	if rule.share <= 0 {
		return nil, nil
	}
	d, err := probePace(c)
	if err != nil || !d.ok {
		return nil, err
	}
	pc, err := dial(a.ctx, cp.dial, addr, cp.timeout, controlBufs)
	if err != nil {
		return nil, err
	}
	a.track(pc)
	return &pacer{c: pc, rule: rule, counts: &cp.counts.pace, allowed: int64(float64(d.limit) * rule.share), minSize: d.size,
		base: d.written, written: d.written, polled: time.Now()}, nil
}

// backlog is what was sent and, by the last stats, not flushed yet.
func (p *pacer) backlog() int64 { return p.sent - (p.written - p.base) }

// before waits, if the backlog is over what it may be, until the
// destination has flushed enough, then counts an item of size bytes as
// sent. It returns at once when ctx ends (the copy stops between items).
func (p *pacer) before(ctx context.Context, size int64) error {
	if size < p.minSize {
		return nil
	}
	if p.backlog() > p.allowed {
		if err := p.wait(ctx); err != nil {
			return err
		}
	}
	p.sent += size
	return nil
}

// wait asks the destination for its flush every poll until the backlog
// is under what it may be, the destination flushes nothing for stall, or
// longest has passed; on the bound, it forgives the backlog.
func (p *pacer) wait(ctx context.Context) error {
	start := time.Now()
	grew := start
	defer func() {
		p.counts.waits.Add(1)
		p.counts.waited.Add(int64(time.Since(start)))
	}()
	for {
		if due := p.polled.Add(p.rule.poll); time.Now().Before(due) {
			t := time.NewTimer(time.Until(due))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil
			}
		}
		st, err := stats(p.c, "stats")
		if err != nil {
			return err
		}
		p.polled = time.Now()
		if w := st["extstore_bytes_written"]; w > p.written {
			p.written, grew = w, p.polled
		}
		if p.backlog() <= p.allowed {
			return nil
		}
		if p.polled.Sub(grew) >= p.rule.stall || p.polled.Sub(start) >= p.rule.longest {
			p.counts.gaveUp.Add(1)
			p.sent, p.base = 0, p.written
			return nil
		}
	}
}

func (p *pacer) close() { p.c.close() }

// stats sends a stats command on c and reads its STAT lines' numbers up
// to END (a value that is no integer is left out); an error line in their
// place (ERROR, CLIENT_ERROR, SERVER_ERROR) gives none.
func stats(c *conn, cmd string) (map[string]int64, error) {
	c.w.WriteString(cmd)
	c.w.WriteString("\r\n")
	if err := c.flush(); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for first := true; ; first = false {
		l, err := c.line()
		if err != nil {
			return nil, err
		}
		if string(l) == "END" {
			return out, nil
		}
		if first && bytes.HasSuffix(bytes.SplitN(l, []byte(" "), 2)[0], []byte("ERROR")) {
			// A server that will not say: one line, and nothing known.
			return out, nil
		}
		f := bytes.SplitN(l, []byte(" "), 3)
		if len(f) != 3 || string(f[0]) != "STAT" {
			return nil, &protocolError{addr: c.addr, msg: fmt.Sprintf("%s answered %q", cmd, l)}
		}
		if n, err := strconv.ParseInt(string(f[2]), 10, 64); err == nil {
			out[string(f[1])] = n
		}
	}
}
