package main

import (
	"fmt"
	"net/http"
	"time"
)

// limitConcurrency bounds the hook calls worked on at once, because each
// one holds its whole request (4 to 5 MB for a 1,000-Pod Memcached) and
// several times that decoded: without a bound, a burst, or Metacontroller
// retrying calls it gave up on while the hook still works on them, would
// grow memory until the Pod is OOM-killed, failing every call.
//
// A call over the limit waits for a slot, up to maxWait, with its body
// still unread (in the kernel's buffers, not the heap). If none frees up it
// gets 429 with Retry-After: Metacontroller takes that as "requeue this
// parent after that many seconds", with no SyncError event and no growing
// backoff, where any other failure would count as an error.
func limitConcurrency(max int, maxWait time.Duration) func(http.Handler) http.Handler {
	slots := make(chan struct{}, max)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case slots <- struct{}{}:
			default:
				timer := time.NewTimer(maxWait)
				defer timer.Stop()
				select {
				case slots <- struct{}{}:
				case <-timer.C:
					w.Header().Set("Retry-After", "1")
					writeError(w, &httpError{status: http.StatusTooManyRequests, msg: fmt.Sprintf("the hook is answering %d calls already (--max-concurrent-calls); retry later", max)})
					return
				case <-r.Context().Done():
					// The caller left; nobody reads an answer.
					w.Header().Set("Retry-After", "1")
					writeError(w, &httpError{status: http.StatusTooManyRequests, msg: "the caller went away while waiting for a slot"})
					return
				}
			}
			defer func() { <-slots }()
			next.ServeHTTP(w, r)
		})
	}
}
