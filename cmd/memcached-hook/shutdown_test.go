package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"syscall"
	"testing"

	"github.com/example/memcached-operator/test/testutil"
)

// callOutcome is how one call during shutdown ended.
type callOutcome int

const (
	// answered: a 200 whose whole body passed strict decoding.
	answered callOutcome = iota
	// refused: no connection (refused at connect), or a connection that
	// ended before any byte of an answer (see TestShutdownUnderLoad).
	refused
	// broken: anything else, which the hook must never do.
	broken
)

// shutdownCall makes one sync call and says how it ended; for a broken
// one it also says why.
func shutdownCall(ctx context.Context, client *http.Client, url string, body []byte) (callOutcome, string) {
	var dialFailed, gotAnswer bool
	trace := &httptrace.ClientTrace{
		ConnectDone:          func(_, _ string, err error) { dialFailed = err != nil },
		GotFirstResponseByte: func() { gotAnswer = true },
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return broken, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		switch {
		case dialFailed && errors.Is(err, syscall.ECONNREFUSED):
			return refused, ""
		case !gotAnswer:
			return refused, ""
		}
		return broken, "error after the answer began: " + err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return broken, fmt.Sprintf("status %d, answer cut after %d bytes: %v", resp.StatusCode, len(b), err)
	}
	if resp.StatusCode != http.StatusOK {
		return broken, fmt.Sprintf("status %d: %.200s", resp.StatusCode, b)
	}
	var a syncAnswer
	if err := testutil.StrictDecodeErr(b, &a); err != nil || a.Children == nil {
		return broken, fmt.Sprintf("incomplete 200 (%v): %.200s", err, b)
	}
	return answered, ""
}

// TestShutdownUnderLoad runs the whole program under load from N
// concurrent callers, each on keep-alive connections, and ends its context
// (what SIGTERM does) mid-run. Every call must be answered 200 in full, or
// not served at all (refused at connect); none may get an error status, a
// cut or half answer. A call made once the shutdown delay has begun is
// answered, and each caller ends refused once the hook has stopped
// listening.
//
// "Not served at all" includes a connection reset before any byte of an
// answer: when the listener closes, connections the kernel completed but
// the server had not yet accepted are reset. Either way the caller knows
// nothing was answered, and Metacontroller retries.
func TestShutdownUnderLoad(t *testing.T) {
	const callers = 8
	body := testutil.BigRequest(t, 200)
	h := startRun(t, []string{"--listen-address=127.0.0.1:0", "--shutdown-delay=1s", "--shutdown-timeout=20s", "--max-concurrent-calls=4", "--queue-timeout=20s"}, nil)
	url := "http://" + h.addr + "/sync"

	var (
		mu               sync.Mutex
		counts           = map[callOutcome]int{}
		problems         []string
		answeredDuringSD int
		shutdownBegun    bool
	)
	warmedUp := make(chan struct{}, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			for n := 0; ; n++ {
				mu.Lock()
				begunBefore := shutdownBegun
				mu.Unlock()
				outcome, why := shutdownCall(context.Background(), client, url, body)
				mu.Lock()
				counts[outcome]++
				if why != "" {
					problems = append(problems, why)
				}
				if outcome == answered && begunBefore {
					answeredDuringSD++
				}
				mu.Unlock()
				if n == 2 {
					warmedUp <- struct{}{}
				}
				if outcome == refused && begunBefore {
					return
				}
				if outcome == broken && len(problems) > 20 {
					return
				}
			}
		})
	}
	for range callers {
		<-warmedUp
	}
	mu.Lock()
	shutdownBegun = true
	mu.Unlock()
	h.cancel()
	// A call made once the shutdown delay has begun, on a connection of
	// its own (a caller that has not yet seen /readyz fail), is answered
	// in full. It is made on the hook's word that the delay began, not by
	// the callers above: under load their calls in flight can outlast
	// the delay, and then none of them begins inside it.
	h.stdout.WaitFor(t, "shutting down", h.exited)
	if outcome, why := shutdownCall(context.Background(), &http.Client{Transport: &http.Transport{}}, url, body); outcome != answered {
		t.Errorf("a call made when the shutdown delay began was not answered (%s), want calls served during --shutdown-delay", map[callOutcome]string{refused: "refused", broken: why}[outcome])
	}
	wg.Wait()
	if err := h.stop(t); err != nil {
		t.Errorf("run = %v, want nil", err)
	}

	t.Logf("outcomes: %d answered (%d after shutdown began), %d refused", counts[answered], answeredDuringSD, counts[refused])
	for _, p := range problems {
		t.Errorf("call broken during shutdown: %s", p)
	}
	if conn, err := net.Dial("tcp", h.addr); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after run returned", h.addr)
	}
	for _, l := range h.stdout.Lines(t) {
		if l["level"] == "ERROR" {
			t.Errorf("error logged: %v", l)
		}
	}
}
