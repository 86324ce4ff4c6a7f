// Command loadgen puts one closed-loop load on memcached servers in turn,
// in alternating rounds, and prints for each target requests per second
// and latency quantiles, then each target's ratio to the first, as
// benchmark lines (BenchmarkProxyCost/NAME ..., or -bench's name). The
// proxy's cost benchmark (test/proxy, BenchmarkProxyCost, make bench) and
// its zones' test (TestZonesProxy) build and run it: a program of its own, so
// that the load is the same whether the tests run with the race detector
// or not.
//
//	loadgen -target direct=127.0.19.40:11211 -target proxy=127.0.19.201:11211
//
// Each connection is a closed loop: a request, its answer, the next
// request; gets (-get-share) and sets of -value bytes over -keys keys, in
// memcached's text protocol, as client libraries send them. Every key is
// stored on each target first, so that gets are hits everywhere.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	if err := run(os.Args, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

// targets are -target name=host:port flags, in order.
type targets []struct{ name, addr string }

func (t *targets) String() string { return fmt.Sprint(*t) }

func (t *targets) Set(v string) error {
	name, addr, ok := strings.Cut(v, "=")
	if !ok || name == "" || addr == "" {
		return fmt.Errorf("want name=host:port, got %q", v)
	}
	*t = append(*t, struct{ name, addr string }{name, addr})
	return nil
}

type config struct {
	targets  targets
	conns    int
	keys     int
	value    int
	getShare float64
	round    time.Duration
	rounds   int
	bench    string
}

func run(args []string, stdout io.Writer) error {
	var cfg config
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.Var(&cfg.targets, "target", "a server to load, `name=host:port` (repeat; the first is the one the others are compared with)")
	fs.IntVar(&cfg.conns, "conns", 8, "connections, each a closed loop")
	fs.IntVar(&cfg.keys, "keys", 10000, "keys")
	fs.IntVar(&cfg.value, "value", 100, "bytes of each value set")
	fs.Float64Var(&cfg.getShare, "get-share", 0.9, "share of requests that are gets; the rest are sets")
	fs.DurationVar(&cfg.round, "round", 1500*time.Millisecond, "how long each target is loaded per round")
	fs.IntVar(&cfg.rounds, "rounds", 2, "rounds: each loads every target in turn")
	fs.StringVar(&cfg.bench, "bench", "BenchmarkProxyCost", "the benchmark lines' name, before /target")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if len(cfg.targets) == 0 || cfg.conns < 1 || cfg.keys < 1 || cfg.rounds < 1 || cfg.round <= 0 {
		return errors.New("need -target, and positive -conns, -keys, -rounds and -round")
	}
	value := strings.Repeat("v", cfg.value)
	for _, tg := range cfg.targets {
		if err := preload(tg.addr, cfg.keys, value); err != nil {
			return fmt.Errorf("%s: storing the keys: %w", tg.name, err)
		}
	}
	results := make([]result, len(cfg.targets))
	for round := range cfg.rounds {
		for i, tg := range cfg.targets {
			r := load(tg.addr, cfg, value, uint64(round))
			if r.errors > 0 {
				return fmt.Errorf("%s: %d requests failed: %v", tg.name, r.errors, r.err)
			}
			results[i].add(r)
		}
	}
	for i, tg := range cfg.targets {
		r := &results[i]
		fmt.Fprintf(stdout, "%s/%s 1 %.0f ops/s %.0f p50-us %.0f p99-us %d conns\n", cfg.bench, tg.name, r.rate(),
			us(r.quantile(0.5)), us(r.quantile(0.99)), cfg.conns)
	}
	base := &results[0]
	for i, tg := range cfg.targets[1:] {
		r := &results[i+1]
		fmt.Fprintf(stdout, "%s/%s-vs-%s 1 %.2f x-throughput %.2f x-p50 %.2f x-p99\n", cfg.bench, tg.name, cfg.targets[0].name,
			r.rate()/base.rate(), float64(r.quantile(0.5))/float64(base.quantile(0.5)), float64(r.quantile(0.99))/float64(base.quantile(0.99)))
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// result is what loading one target measured.
type result struct {
	ops, errors int
	err         error
	elapsed     time.Duration
	latencies   []time.Duration
}

func (r *result) add(o result) {
	r.ops += o.ops
	r.errors += o.errors
	r.elapsed += o.elapsed
	r.latencies = append(r.latencies, o.latencies...)
}

func (r *result) rate() float64 { return float64(r.ops) / r.elapsed.Seconds() }

func (r *result) quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	slices.Sort(r.latencies)
	return r.latencies[int(q*float64(len(r.latencies)-1))]
}

// preload stores every key on addr.
func preload(addr string, keys int, value string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReader(c)
	for i := range keys {
		if err := set(c, r, fmt.Sprintf("load-%d", i), value); err != nil {
			return err
		}
	}
	return nil
}

// load runs cfg.conns closed loops against addr for cfg.round.
func load(addr string, cfg config, value string, seed uint64) result {
	results := make([]result, cfg.conns)
	var wg sync.WaitGroup
	began := time.Now()
	end := began.Add(cfg.round)
	for i := range cfg.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := &results[i]
			res.latencies = make([]time.Duration, 0, 1<<15)
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				res.errors, res.err = 1, err
				return
			}
			defer c.Close()
			r := bufio.NewReader(c)
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for {
				start := time.Now()
				if start.After(end) {
					return
				}
				_ = c.SetDeadline(start.Add(5 * time.Second))
				key := fmt.Sprintf("load-%d", rng.IntN(cfg.keys))
				if rng.Float64() < cfg.getShare {
					err = get(c, r, key)
				} else {
					err = set(c, r, key, value)
				}
				res.latencies = append(res.latencies, time.Since(start))
				res.ops++
				if err != nil {
					res.errors, res.err = res.errors+1, err
					return
				}
			}
		}()
	}
	wg.Wait()
	var total result
	for _, r := range results {
		total.add(r)
		if r.err != nil {
			total.err = r.err
		}
	}
	total.elapsed = time.Since(began)
	return total
}

// get sends get key and reads the answer through END.
func get(c net.Conn, r *bufio.Reader, key string) error {
	if _, err := io.WriteString(c, "get "+key+"\r\n"); err != nil {
		return err
	}
	for {
		line, err := r.ReadString('\n')
		switch {
		case err != nil:
			return err
		case line == "END\r\n":
			return nil
		case strings.HasPrefix(line, "VALUE "):
			var k string
			var flags, n int
			if _, err := fmt.Sscanf(line, "VALUE %s %d %d", &k, &flags, &n); err != nil {
				return fmt.Errorf("get %s: %q", key, line)
			}
			if _, err := r.Discard(n + 2); err != nil {
				return err
			}
		default:
			return fmt.Errorf("get %s: %q", key, line)
		}
	}
}

// set stores key and reads STORED.
func set(c net.Conn, r *bufio.Reader, key, value string) error {
	if _, err := fmt.Fprintf(c, "set %s 0 0 %d\r\n%s\r\n", key, len(value), value); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "STORED\r\n" {
		return fmt.Errorf("set %s: %q", key, line)
	}
	return nil
}
