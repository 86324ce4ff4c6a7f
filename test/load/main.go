// Command load measures the hook over HTTP on loopback: requests per second
// and p50/p99 latency for a 3-Pod and a 1,000-Pod sync, against the real
// hook binary and, in the same run, against a floor server that only reads
// the request, scans it once (a validating JSON v2 scan) and answers a fixed
// body. It also reads the hook's own logged handler time per call, and both
// processes' peak resident memory, which after the 1,000-Pod phase at
// concurrency 8 is the peak under 8 concurrent 1,000-Pod calls.
//
// It only ever talks to the two servers it starts, on 127.0.0.1, and every
// phase is bounded in requests and in time. make bench runs it:
//
//	go run ./test/load -hook bin/memcached-hook -requests .cache/bench
//
// where the requests directory holds 3.json and 1000.json, as the sync
// package's TestWriteBenchRequests writes them (grown from a real capture).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"sync/atomic"
	"time"

	"github.com/example/memcached-operator/test/testutil"
	"github.com/go-json-experiment/json/jsontext"
)

func main() {
	var (
		hookBin     = flag.String("hook", "bin/memcached-hook", "the hook `binary` to start (make build makes it)")
		requests    = flag.String("requests", ".cache/bench", "`directory` holding 3.json and 1000.json, the sync requests to send")
		duration    = flag.Duration("duration", 3*time.Second, "how long each phase sends requests, at most")
		maxRequests = flag.Int("max-requests", 3000, "how many requests each phase sends, at most")
		serveFloor  = flag.Bool("serve-floor", false, "run as the floor server (used by this program itself)")
	)
	flag.Parse()
	log.SetFlags(0)
	if *serveFloor {
		runFloor()
		return
	}
	if err := run(*hookBin, *requests, *duration, *maxRequests); err != nil {
		log.Fatalf("load: %v", err)
	}
}

// server is one of the two servers under load: a child process that
// printed the address it listens on.
type server struct {
	name string
	cmd  *exec.Cmd
	addr string
	// handler collects the hook's logged duration_ms of each call, in
	// milliseconds; the floor logs none.
	mu      gosync.Mutex
	handler []float64
	logged  atomic.Int64
}

func run(hookBin, requests string, duration time.Duration, maxRequests int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	bodies := map[int][]byte{}
	for _, n := range []int{3, 1000} {
		b, err := os.ReadFile(filepath.Join(requests, fmt.Sprintf("%d.json", n)))
		if err != nil {
			return fmt.Errorf("%w (make bench writes it with sync/memcached's TestWriteBenchRequests)", err)
		}
		bodies[n] = b
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	hook, err := start(ctx, "hook", hookBin, "--listen-address=127.0.0.1:0", "--log-format=json")
	if err != nil {
		return err
	}
	defer stop(hook)
	floor, err := start(ctx, "floor", self, "-serve-floor")
	if err != nil {
		return err
	}
	defer stop(floor)

	fmt.Printf("load: %d CPUs; hook %s, floor %s; each phase %v or %d requests\n", runtime.NumCPU(), hook.addr, floor.addr, duration, maxRequests)
	fmt.Printf("start RSS: hook %s, floor %s\n", mib(rss(hook, "VmRSS")), mib(rss(floor, "VmRSS")))
	fmt.Println()
	fmt.Printf("%-6s %-5s %-6s %9s %9s %9s %9s %14s %14s\n", "pods", "conc", "server", "requests", "req/s", "p50", "p99", "handler p50", "handler p99")
	type key struct{ pods, conc int }
	results := map[key]map[string]phase{}
	for _, n := range []int{3, 1000} {
		for _, conc := range []int{1, 8} {
			results[key{n, conc}] = map[string]phase{}
			for _, s := range []*server{hook, floor} {
				p, err := load(ctx, s, bodies[n], conc, duration, maxRequests)
				if err != nil {
					return fmt.Errorf("%s, %d Pods, concurrency %d: %w", s.name, n, conc, err)
				}
				results[key{n, conc}][s.name] = p
				hp50, hp99 := "-", "-"
				if len(p.handler) > 0 {
					hp50, hp99 = ms(percentile(p.handler, 50)), ms(percentile(p.handler, 99))
				}
				fmt.Printf("%-6d %-5d %-6s %9d %9.0f %9s %9s %14s %14s\n", n, conc, s.name, p.requests, p.rps, ms(p.p50), ms(p.p99), hp50, hp99)
			}
		}
	}
	fmt.Println()
	fmt.Println("hook against floor, same run (throughput: floor/hook; latency: hook/floor):")
	for _, n := range []int{3, 1000} {
		for _, conc := range []int{1, 8} {
			h, f := results[key{n, conc}]["hook"], results[key{n, conc}]["floor"]
			fmt.Printf("  %4d Pods, concurrency %d: req/s %.2fx, p50 %.2fx, p99 %.2fx\n", n, conc, f.rps/h.rps, h.p50/f.p50, h.p99/f.p99)
		}
	}
	fmt.Println()
	fmt.Printf("peak RSS (VmHWM) after 8 concurrent 1,000-Pod calls (request %s): hook %s, floor %s\n",
		mib(int64(len(bodies[1000]))), mib(rss(hook, "VmHWM")), mib(rss(floor, "VmHWM")))
	return nil
}

// phase is what one load phase measured. Latencies are in milliseconds.
type phase struct {
	requests int
	rps      float64
	p50, p99 float64
	handler  []float64
}

// load sends body to s's /sync from conc workers until duration has passed
// or maxRequests have been sent, after a short warm-up, and measures every
// answer, each of which must be a 200.
func load(ctx context.Context, s *server, body []byte, conc int, duration time.Duration, maxRequests int) (phase, error) {
	client := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConnsPerHost: conc,
			DisableCompression:  true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
					return nil, fmt.Errorf("refusing to dial %s: loopback only", addr)
				}
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
		},
	}
	defer client.CloseIdleConnections()
	url := "http://" + s.addr + "/sync"
	post := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		answer, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d: %.300s", resp.StatusCode, answer)
		}
		return nil
	}
	for range 2 * conc { // warm-up: connections, caches
		if err := post(); err != nil {
			return phase{}, err
		}
	}
	s.mu.Lock()
	s.handler = nil
	s.mu.Unlock()
	s.logged.Store(0)

	var (
		sent      atomic.Int64
		mu        gosync.Mutex
		latencies []float64
		firstErr  error
		wg        gosync.WaitGroup
	)
	deadline := time.Now().Add(duration)
	start := time.Now()
	for range conc {
		wg.Go(func() {
			var mine []float64
			for time.Now().Before(deadline) && sent.Add(1) <= int64(maxRequests) {
				t := time.Now()
				if err := post(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				mine = append(mine, float64(time.Since(t).Microseconds())/1000)
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return phase{}, firstErr
	}
	// The hook logs a call after answering it: wait for the last lines.
	if s.name == "hook" {
		for wait := time.Now().Add(2 * time.Second); s.logged.Load() < int64(len(latencies)) && time.Now().Before(wait); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	s.mu.Lock()
	handler := slices.Clone(s.handler)
	s.mu.Unlock()
	return phase{
		requests: len(latencies),
		rps:      float64(len(latencies)) / elapsed.Seconds(),
		p50:      percentile(latencies, 50),
		p99:      percentile(latencies, 99),
		handler:  handler,
	}, nil
}

// start runs a server process and waits for its JSON "listening" log line,
// which names its address. The rest of its output is read on: "hook call"
// lines give the handler's duration.
func start(ctx context.Context, name, bin string, args ...string) (*server, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd}
	addr := make(chan string, 1)
	go func() {
		sc := testutil.Lines(out, 1<<20)
		for sc.Scan() {
			var line struct {
				Msg        string   `json:"msg"`
				Address    string   `json:"address"`
				DurationMS *float64 `json:"duration_ms"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch {
			case line.Msg == "listening":
				addr <- line.Address
			case line.Msg == "hook call" && line.DurationMS != nil:
				s.mu.Lock()
				s.handler = append(s.handler, *line.DurationMS)
				s.mu.Unlock()
				s.logged.Add(1)
			}
		}
	}()
	select {
	case s.addr = <-addr:
	case <-time.After(20 * time.Second):
		stop(s)
		return nil, fmt.Errorf("%s did not log its listening address within 20s", name)
	}
	if host, _, err := net.SplitHostPort(s.addr); err != nil || !net.ParseIP(host).IsLoopback() {
		stop(s)
		return nil, fmt.Errorf("%s listens on %q, not on loopback", name, s.addr)
	}
	return s, nil
}

// stop ends a server process this program started.
func stop(s *server) {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

// runFloor serves the floor: read the body as the hook does (one buffer of
// the stated length), scan it once with JSON v2's validating scan under the
// hook's rules, answer a fixed, valid, sync answer. No server that reads its
// request can answer faster.
func runFloor() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fixed := []byte(`{"status":{},"children":[]}` + "\n")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(r)
		if err != nil || !jsontext.Value(body).IsValid() {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(fixed)))
		w.Write(fixed)
	})
	line, _ := json.Marshal(map[string]string{"msg": "listening", "address": ln.Addr().String()})
	fmt.Println(string(line))
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// readBody reads a request body as the hook's decode does.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength <= 0 {
		return io.ReadAll(r.Body)
	}
	buf := make([]byte, r.ContentLength)
	_, err := io.ReadFull(r.Body, buf)
	return buf, err
}

// rss reads a memory figure (VmRSS, VmHWM) of a server process from /proc,
// in bytes; -1 where there is no /proc.
func rss(s *server, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// percentile returns the p-th percentile of xs (nearest rank).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.0fµs", v*1000)
	}
	return fmt.Sprintf("%.2fms", v)
}

func mib(b int64) string {
	if b < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
