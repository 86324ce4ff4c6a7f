package protocol

import (
	"bytes"
	"testing"
)

// FuzzTranscript sends any bytes as one connection's input. Whatever they
// are: no panic, and what is written back is a sequence of whole answers
// the endpoint gives (never a half answer or anything else), at most one
// per line read.
//
// make test runs it for a few seconds; make fuzz for as long as you like.
func FuzzTranscript(f *testing.F) {
	for _, s := range []string{
		"config get cluster\r\n", "get AmazonElastiCache:cluster\r\n", "gets AmazonElastiCache:cluster foo\r\n",
		"version\r\nquit\r\n", "set a 0 0 5\r\nhello\r\nversion\r\n", "ms a 2 T0\r\nhi\r\n", "GET / HTTP/1.1\r\n",
		"foo noreply\r\n", "mg a !x\r\n", "\n", "get " + string(bytes.Repeat([]byte("k "), 1200)) + "\r\n",
	} {
		f.Add([]byte(s), false)
	}
	list := NewAnswers(testVersion, testNodes)
	answers := [][]byte{
		list.Config(), list.value, list.valueCAS,
		[]byte(endAnswer), []byte(errorAnswer), []byte(badFormatAnswer), []byte(versionAnswer), []byte(noListAnswer),
	}
	f.Fuzz(func(t *testing.T, input []byte, noList bool) {
		l := list
		if noList {
			l = nil
		}
		out := Transcript(input, l)
		lines := bytes.Count(input, []byte("\n"))
		n := 0
		for rest := out; len(rest) > 0; n++ {
			matched := false
			for _, a := range answers {
				if bytes.HasPrefix(rest, a) {
					rest, matched = rest[len(a):], true
					break
				}
			}
			if !matched {
				t.Fatalf("answer %.200q is none the endpoint gives (input %.200q)", rest, input)
			}
		}
		// A get's VALUE blocks and its END are one answer each here.
		if max := lines * (1 + bytes.Count(input, []byte(ClusterKey))); n > max {
			t.Fatalf("%d answers to %d lines: %.200q", n, lines, input)
		}
	})
}
