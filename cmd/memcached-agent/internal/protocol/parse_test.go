package protocol

import (
	"strings"
	"testing"

	"github.com/example/memcached-operator/sync/slots"
)

// testNodes are three servers as the agent serves them.
var testNodes = []slots.Node{
	{Host: "10-244-1-7.cache.shop.svc", IP: "10.244.1.7", Port: 11211},
	{Host: "10-244-2-3.cache.shop.svc", IP: "10.244.2.3", Port: 11211},
	{Host: "10-244-3-9.cache.shop.svc", IP: "10.244.3.9", Port: 11211},
}

const testVersion = 1767225600

// Answers to the cluster key and config get cluster for testNodes, spelt
// out once here (the golden files hold them too).
const (
	testPayload = "1767225600\n10-244-1-7.cache.shop.svc|10.244.1.7|11211 10-244-2-3.cache.shop.svc|10.244.2.3|11211 10-244-3-9.cache.shop.svc|10.244.3.9|11211\n"
	testValue   = "VALUE AmazonElastiCache:cluster 0 140\r\n" + testPayload + "\r\n"
	testConfig  = "CONFIG cluster 0 140\r\n" + testPayload + "\r\nEND\r\n"
)

// TestTranscript feeds whole connections' input to the parser and the
// answers, and checks every byte written back, case by case as memcached
// 1.6.45 parses the same input (proto_parser.c, proto_text.c, mcmc.c; the
// cases that memcached answers too are also run against it, see
// TestSameAsMemcached).
func TestTranscript(t *testing.T) {
	if len(testPayload) != 140 {
		t.Fatalf("the test's payload is %d bytes, its header says 140", len(testPayload))
	}
	long := func(n int) string { return strings.Repeat("k", n) }
	tests := []struct {
		name   string
		in     string
		noList bool
		want   string
	}{
		// Auto Discovery.
		{name: "config get cluster", in: "config get cluster\r\n", want: testConfig},
		{name: "config get cluster with a bare newline", in: "config get cluster\n", want: testConfig},
		{name: "config get cluster, spaces around", in: "config  get   cluster  \r\n", want: testConfig},
		{name: "config get cluster before a list", in: "config get cluster\r\n", noList: true, want: "SERVER_ERROR no server list yet\r\n"},
		{name: "config with another key", in: "config get nodes\r\n", want: "ERROR\r\n"},
		{name: "config with more tokens", in: "config get cluster now\r\n", want: "ERROR\r\n"},
		{name: "config with more tokens, noreply", in: "config get cluster noreply\r\nversion\r\n", want: "VERSION 1.6.45\r\n"},
		{name: "config in capitals", in: "CONFIG GET CLUSTER\r\n", want: "ERROR\r\n"},
		{name: "get the cluster key", in: "get AmazonElastiCache:cluster\r\n", want: testValue + "END\r\n"},
		{name: "gets the cluster key", in: "gets AmazonElastiCache:cluster\r\n", want: "VALUE AmazonElastiCache:cluster 0 140 1767225600\r\n" + testPayload + "\r\nEND\r\n"},
		{name: "get the cluster key before a list", in: "get AmazonElastiCache:cluster\r\n", noList: true, want: "SERVER_ERROR no server list yet\r\n"},
		{name: "get another key before a list", in: "get foo\r\n", noList: true, want: "END\r\n"},
		{name: "get another key", in: "get foo\r\n", want: "END\r\n"},
		{name: "get several keys", in: "get foo AmazonElastiCache:cluster bar\r\n", want: testValue + "END\r\n"},
		{name: "get the cluster key twice", in: "get AmazonElastiCache:cluster AmazonElastiCache:cluster\r\n", want: testValue + testValue + "END\r\n"},
		{name: "get with noreply still answers", in: "get foo noreply\r\n", want: "END\r\n"},
		{name: "get keys spread by spaces", in: "get  foo   AmazonElastiCache:cluster \r\n", want: testValue + "END\r\n"},
		{name: "get a key with a tab is another key", in: "get AmazonElastiCache:cluster\t\r\n", want: "END\r\n"},
		{name: "get a key of 250 bytes", in: "get " + long(250) + "\r\n", want: "END\r\n"},
		{name: "get a key of 251 bytes", in: "get " + long(251) + "\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{name: "a long key drops the values before it", in: "get AmazonElastiCache:cluster " + long(251) + "\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{name: "get without a key", in: "get\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{name: "gets without a key", in: "gets \r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{name: "get in capitals", in: "GET AmazonElastiCache:cluster\r\n", want: "ERROR\r\n"},

		// version and quit.
		{name: "version", in: "version\r\n", want: "VERSION 1.6.45\r\n"},
		{name: "version with a bare newline", in: "version\n", want: "VERSION 1.6.45\r\n"},
		{name: "version with arguments", in: "version extra\r\n", want: "VERSION 1.6.45\r\n"},
		{name: "version with a tab", in: "version\t\r\n", want: "ERROR\r\n"},
		{name: "version with two carriage returns", in: "version\r\r\n", want: "ERROR\r\n"},
		{name: "version after a space", in: " version\r\n", want: "ERROR\r\n"},
		{name: "quit", in: "quit\r\nversion\r\n", want: ""},
		{name: "quit sends the answers before it", in: "version\r\nquit\r\nversion\r\n", want: "VERSION 1.6.45\r\n"},

		// Pipelining.
		{name: "pipelined commands in order", in: "version\r\nconfig get cluster\r\nget foo\nnope\r\n", want: "VERSION 1.6.45\r\n" + testConfig + "END\r\nERROR\r\n"},
		{name: "a line cut short is not answered", in: "version\r\nversion", want: "VERSION 1.6.45\r\n"},

		// Errors, as memcached answers them.
		{name: "unknown command", in: "foo\r\n", want: "ERROR\r\n"},
		{name: "unknown command, noreply", in: "foo noreply\r\nversion\r\n", want: "VERSION 1.6.45\r\n"},
		{name: "two bytes", in: "ab\r\n", want: "ERROR\r\n"},
		{name: "shorter than four bytes", in: "a\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{name: "empty line", in: "\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{name: "bare newline", in: "\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{name: "mn with a bare newline is three bytes", in: "mn\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{name: "meta no-op", in: "mn\r\n", want: "ERROR\r\n"},
		{name: "meta get with a bad flag", in: "mg a !x\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{name: "meta get", in: "mg a v\r\n", want: "ERROR\r\n"},
		{name: "delete", in: "delete a\r\n", want: "ERROR\r\n"},
		{name: "delete noreply", in: "delete a noreply\r\nversion\r\n", want: "VERSION 1.6.45\r\n"},
		{name: "incr without a delta", in: "incr a\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{name: "gat without a key", in: "gat 10\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{name: "stats", in: "stats\r\n", want: "ERROR\r\n"},
		{name: "an admin command ending in HTTP/", in: "verbosity HTTP/1.1\r\nversion\r\n", want: "ERROR\r\nVERSION 1.6.45\r\n"},

		// Storage commands: the value is dropped, the stream stays in step.
		{name: "set", in: "set a 0 0 5\r\nhello\r\nversion\r\n", want: "ERROR\r\nVERSION 1.6.45\r\n"},
		{name: "set noreply", in: "set a 0 0 5 noreply\r\nhello\r\nversion\r\n", want: "VERSION 1.6.45\r\n"},
		{name: "set with a long key", in: "set " + long(251) + " 0 0 5\r\nhello\r\nversion\r\n", want: "CLIENT_ERROR bad command line format\r\nVERSION 1.6.45\r\n"},
		{name: "set with a negative length", in: "set a 0 0 -1\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{name: "set without a length", in: "set a 0 0\r\n", want: "CLIENT_ERROR bad command line format\r\n"},
		{name: "cas", in: "cas a 0 0 2 7\r\nhi\r\nversion\r\n", want: "ERROR\r\nVERSION 1.6.45\r\n"},
		{name: "meta set", in: "ms a 2 T0\r\nhi\r\nversion\r\n", want: "ERROR\r\nVERSION 1.6.45\r\n"},
		{name: "meta set with a bad flag reads no value", in: "ms a 5 !x\r\nhello\r\n", want: "CLIENT_ERROR bad command line format\r\nERROR\r\n"},
		{name: "set whose value never comes", in: "set a 0 0 100\r\nhi\r\n", want: ""},

		// Lines memcached closes the connection on.
		{name: "HTTP request", in: "GET / HTTP/1.1\r\nversion\r\n", want: ""},
		{name: "answers before an HTTP request are sent", in: "version\r\nGET / HTTP/1.1\r\n", want: "VERSION 1.6.45\r\n"},
		{name: "HTTP/ alone", in: "foo HTTP/\r\n", want: ""},
		{name: "HTTP without a slash", in: "foo HTTP\r\n", want: "ERROR\r\n"},
		{name: "HTTP/ past the 23rd token", in: "foo" + strings.Repeat(" a", 30) + " HTTP/1.1\r\n", want: "ERROR\r\n"},
		{name: "HTTP/ as the 23rd token", in: "foo" + strings.Repeat(" a", 21) + " HTTP/1.1 b c\r\n", want: ""},
		{name: "line of 2048 bytes", in: "version" + strings.Repeat(" ", 2041) + "\n", want: "VERSION 1.6.45\r\n"},
		{name: "line of 2049 bytes", in: "version" + strings.Repeat(" ", 2042) + "\n", want: ""},
		{name: "line of 2049 bytes with its carriage return", in: "version" + strings.Repeat(" ", 2041) + "\r\n", want: ""},
		{name: "long get", in: "get" + strings.Repeat(" k", 3000) + " AmazonElastiCache:cluster\r\n", want: testValue + "END\r\n"},
		{name: "long gets after spaces", in: strings.Repeat(" ", 100) + "gets" + strings.Repeat(" k", 3000) + "\r\n", want: "ERROR\r\n"},
		{name: "long get after too many spaces", in: strings.Repeat(" ", 101) + "get" + strings.Repeat(" k", 3000) + "\r\n", want: ""},
		{name: "get of 16 KiB", in: "get " + strings.Repeat("k ", (MaxGetLine-4)/2) + "\n", want: "END\r\n"},
		{name: "get over 16 KiB", in: "get " + strings.Repeat("k ", (MaxGetLine-4)/2) + "k\n", want: ""},
	}
	list := NewAnswers(testVersion, testNodes)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := list
			if tt.noList {
				l = nil
			}
			if got := string(Transcript([]byte(tt.in), l)); got != tt.want {
				t.Errorf("answer to %.80q:\n got %.300q\nwant %.300q", tt.in, got, tt.want)
			}
		})
	}
}

// TestParseKinds checks the kind each command line is counted as.
func TestParseKinds(t *testing.T) {
	tests := []struct {
		line string
		want Kind
	}{
		{"config get cluster\r\n", ConfigGetCluster},
		{"get a\r\n", Get},
		{"gets a\r\n", Gets},
		{"version\r\n", Version},
		{"quit\r\n", Quit},
		{"foo\r\n", Unknown},
		{"GET / HTTP/1.0\r\n", HTTP},
		{"set a 0 0 1\r\n", Store},
		{"delete a\r\n", Unserved},
		{"get\r\n", BadFormat},
	}
	for _, tt := range tests {
		if got := Parse([]byte(tt.line)).Kind; got != tt.want {
			t.Errorf("Parse(%q) = %s, want %s", tt.line, got, tt.want)
		}
	}
	for _, k := range Kinds() {
		if k.String() == "" || k.String() == "invalid" {
			t.Errorf("kind %d has no name", k)
		}
	}
}

// TestTokenInt32 checks mcmc_tokto32's range and syntax.
func TestTokenInt32(t *testing.T) {
	tests := []struct {
		in     string
		want   int32
		wantOK bool
	}{
		{"0", 0, true},
		{"2147483647", 2147483647, true},
		{"2147483648", 0, false},
		{"-2147483648", -2147483648, true},
		{"-2147483649", 0, false},
		{"-", 0, true},
		{"", 0, true},
		{"1x", 0, false},
		{"000000000001", 0, false},
	}
	for _, tt := range tests {
		got, ok := tokenInt32([]byte(tt.in))
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("tokenInt32(%q) = %d, %v, want %d, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}
