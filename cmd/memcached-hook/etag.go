package main

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
)

// etagOf is the strong entity tag of an answer: a hash of its bytes, so two
// answers share a tag exactly when they are the same.
func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:]) + `"`
}

// notModified reports whether the request's If-None-Match names etag.
//
// With webhook.etag.enabled, Metacontroller keeps the last 200 answer and
// its ETag for each parent and sends that ETag as If-None-Match; a 304 then
// makes it reuse the kept answer (it accepts 304 only when it sent
// If-None-Match). The hook still computes the answer, so what is saved is
// the transfer and Metacontroller's decoding of it.
//
// Comparison is weak, as RFC 9110 section 13.1.2 asks of If-None-Match, and
// "*" matches any answer. Unlike what that section says for methods other
// than GET and HEAD (412), a match is answered 304, because that is the
// one answer Metacontroller takes for "unchanged".
func notModified(r *http.Request, etag string) bool {
	for _, v := range r.Header.Values("If-None-Match") {
		for tag := range strings.SplitSeq(v, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
				return true
			}
		}
	}
	return false
}
