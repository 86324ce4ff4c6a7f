package protocol

import (
	"bytes"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/example/memcached-operator/sync/slots"
	"github.com/example/memcached-operator/test/testutil"
)

// TestAnswersGolden holds the bytes of every answer about the cluster in
// testdata/ (go test -update rewrites them), and counts N in each header
// against the payload that follows it: AWS's own example miscounts it.
func TestAnswersGolden(t *testing.T) {
	tests := []struct {
		name    string
		version int64
		nodes   []slots.Node
	}{
		{name: "three", version: testVersion, nodes: testNodes},
		{name: "one", version: 7, nodes: testNodes[:1]},
		{name: "ipv6", version: 1767225601, nodes: []slots.Node{{Host: "fd00-10--7.cache.shop.svc", IP: "fd00:10::7", Port: 11211}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAnswers(tt.version, tt.nodes)
			if a.Version() != tt.version {
				t.Errorf("Version() = %d, want %d", a.Version(), tt.version)
			}
			for _, ans := range []struct {
				file   string
				got    []byte
				header string
			}{
				{"config-get-cluster", a.Config(), "CONFIG cluster 0 "},
				{"get-cluster", a.Get(false), "VALUE AmazonElastiCache:cluster 0 "},
				{"gets-cluster", a.Get(true), "VALUE AmazonElastiCache:cluster 0 "},
			} {
				testutil.GoldenBytes(t, filepath.Join("testdata", tt.name+"-"+ans.file+".golden"), ans.got)
				payload := checkBlock(t, ans.got, ans.header)
				want := strconv.FormatInt(tt.version, 10) + "\n"
				for i, n := range tt.nodes {
					if i > 0 {
						want += " "
					}
					want += n.Host + "|" + n.IP + "|" + strconv.Itoa(n.Port)
				}
				want += "\n"
				if payload != want {
					t.Errorf("%s payload = %q, want %q", ans.file, payload, want)
				}
			}
		})
	}
}

// checkBlock parses "HEADER<N>[ cas]\r\n<N bytes>\r\nEND\r\n" and returns
// the N bytes, failing the test when N is not their count.
func checkBlock(t *testing.T, b []byte, header string) string {
	t.Helper()
	if !bytes.HasPrefix(b, []byte(header)) {
		t.Fatalf("answer %q does not start with %q", b, header)
	}
	rest := b[len(header):]
	eol := bytes.Index(rest, []byte("\r\n"))
	if eol < 0 {
		t.Fatalf("answer %q has no header line", b)
	}
	fields := bytes.Fields(rest[:eol])
	n, err := strconv.Atoi(string(fields[0]))
	if err != nil {
		t.Fatalf("byte count in %q: %v", b, err)
	}
	body := rest[eol+2:]
	if len(body) != n+len("\r\nEND\r\n") || !bytes.HasSuffix(body, []byte("\r\nEND\r\n")) {
		t.Fatalf("header says %d bytes, but %d follow before \\r\\nEND\\r\\n: %q", n, len(body)-len("\r\nEND\r\n"), body)
	}
	return string(body[:n])
}
