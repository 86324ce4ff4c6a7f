package handoff

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestRemainingTTL turns mg's t into ms's T.
func TestRemainingTTL(t *testing.T) {
	now := time.Unix(1767225600, 0)
	tests := []struct {
		name     string
		t        string
		wantTTL  int64
		wantLive bool
	}{
		{name: "no expiry", t: "-1", wantTTL: 0, wantLive: true},
		{name: "a second left", t: "1", wantTTL: 1, wantLive: true},
		{name: "30 days, still relative", t: "2592000", wantTTL: 2592000, wantLive: true},
		{name: "over 30 days, a Unix time", t: "2592001", wantTTL: 1767225600 + 2592001, wantLive: true},
		{name: "nothing left", t: "0", wantLive: false},
		{name: "negative", t: "-5", wantLive: false},
		{name: "not a number", t: "x", wantLive: false},
		{name: "beyond 32 bits", t: "4294967295", wantLive: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ttl, live := remainingTTL([]byte(tt.t), func() time.Time { return now })
			if ttl != tt.wantTTL || live != tt.wantLive {
				t.Errorf("remainingTTL(%q) = %d, %v; want %d, %v", tt.t, ttl, live, tt.wantTTL, tt.wantLive)
			}
		})
	}
}

// TestParseDumpLine reads mgdump's lines and tells the operator's keys.
func TestParseDumpLine(t *testing.T) {
	tests := []struct {
		name         string
		line         string
		want         dumpKey
		wantErr      bool
		wantReserved bool
	}{
		{name: "text key", line: "mg foo", want: dumpKey{key: "foo"}},
		{name: "binary key", line: "mg AP8= b", want: dumpKey{key: "AP8=", binary: true}},
		{name: "reserved", line: "mg __memcached-operator/handoff/lock", want: dumpKey{key: "__memcached-operator/handoff/lock"}, wantReserved: true},
		{name: "reserved, binary", line: "mg X19tZW1jYWNoZWQtb3BlcmF0b3IveA== b", want: dumpKey{key: "X19tZW1jYWNoZWQtb3BlcmF0b3IveA==", binary: true}, wantReserved: true},
		{name: "the prefix, not at the start", line: "mg a__memcached-operator/x", want: dumpKey{key: "a__memcached-operator/x"}},
		{name: "no key", line: "mg ", wantErr: true},
		{name: "an unknown flag", line: "mg foo x", wantErr: true},
		{name: "two spaces", line: "mg foo  b", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDumpLine([]byte(tt.line))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("parseDumpLine(%q) = %+v, %v; want %+v, error %v", tt.line, got, err, tt.want, tt.wantErr)
			}
			if err == nil && got.reserved() != tt.wantReserved {
				t.Errorf("reserved() = %v, want %v", got.reserved(), tt.wantReserved)
			}
		})
	}
}

// TestTTLToken rounds a lock's TTL up to whole seconds, at least one.
func TestTTLToken(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Millisecond: "T1", time.Second: "T1", 1500 * time.Millisecond: "T2", 15 * time.Second: "T15"} {
		if got := ttlToken(d); got != want {
			t.Errorf("ttlToken(%s) = %s, want %s", d, got, want)
		}
	}
}

// TestParseWatchLine reads the lines of watch mutations deletions, as
// memcached 1.6.45 wrote them for these commands: keys URI-encoded, a
// binary key raw under its encoding (given base64 back, with b).
func TestParseWatchLine(t *testing.T) {
	bin := base64.StdEncoding.EncodeToString([]byte("\x00bin 1\r\n\xff"))
	tests := []struct {
		name    string
		line    string
		want    watchEvent
		wantErr bool
	}{
		{name: "set", line: "ts=1795656778.71856 gid=2 type=item_store key=foo status=stored cmd=set ttl=0 clsid=1 cfd=29 size=3",
			want: watchEvent{kind: watchStored, key: dumpKey{key: "foo"}}},
		{name: "ms of an encoded key", line: "ts=1795656778.120955 gid=3 type=item_store key=a%25b~c status=stored cmd=set ttl=100 clsid=1 cfd=29 size=2",
			want: watchEvent{kind: watchStored, key: dumpKey{key: "a%b~c"}}},
		{name: "binary key", line: "ts=1795656778.171161 gid=4 type=item_store key=%00bin%201%0D%0A%FF status=stored cmd=set ttl=0 clsid=1 cfd=29 size=1",
			want: watchEvent{kind: watchStored, key: dumpKey{key: bin, binary: true}}},
		{name: "an add that did not store", line: "ts=1795656778.221373 gid=5 type=item_store key=foo status=not_stored cmd=add ttl=0 clsid=1 cfd=29 size=1",
			want: watchEvent{kind: watchOther}},
		{name: "append", line: "ts=1795656778.271636 gid=6 type=item_store key=foo status=stored cmd=append ttl=0 clsid=1 cfd=29 size=4",
			want: watchEvent{kind: watchStored, key: dumpKey{key: "foo"}}},
		{name: "md", line: "ts=1795656778.321839 gid=7 type=deleted key=foo cmd=md clsid=1 size=4",
			want: watchEvent{kind: watchDeleted, key: dumpKey{key: "foo"}}},
		{name: "delete of a binary key", line: "ts=1795656778.424445 gid=9 type=deleted key=%00bin%201%0D%0A%FF cmd=md clsid=1 size=1",
			want: watchEvent{kind: watchDeleted, key: dumpKey{key: bin, binary: true}}},
		{name: "the watch's OK", line: "OK", want: watchEvent{kind: watchOther}},
		{name: "another type", line: "ts=1 gid=1 type=item_get key=foo status=found clsid=1 cfd=2 size=3", want: watchEvent{kind: watchOther}},
		{name: "events lost", line: "skipped=12", want: watchEvent{kind: watchSkipped, skipped: 12}},
		{name: "events lost, not a number", line: "skipped=x", wantErr: true},
		{name: "a cut escape", line: "ts=1 gid=1 type=deleted key=foo%2 cmd=md clsid=1 size=1", wantErr: true},
		{name: "a bad escape", line: "ts=1 gid=1 type=deleted key=%zz cmd=md clsid=1 size=1", wantErr: true},
		{name: "no key", line: "ts=1 gid=1 type=deleted cmd=md clsid=1 size=1", wantErr: true},
		{name: "a key too long", line: "ts=1 gid=1 type=deleted key=" + strings.Repeat("k", 251) + " cmd=md", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseWatchLine([]byte(tt.line))
			if (err != nil) != tt.wantErr || (err == nil && got != tt.want) {
				t.Errorf("parseWatchLine(%q) = %+v, %v; want %+v, error %v", tt.line, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestCopyBuffered moves a value from a reader's buffer into a writer's,
// whatever their sizes, and says when the source ends before the value
// does.
func TestCopyBuffered(t *testing.T) {
	tests := []struct {
		name string
		// held is what the writer holds before, n the value's length,
		// have what the source has.
		held, n, have int
		wantErr       error
	}{
		{name: "within both buffers", held: 10, n: 100, have: 100},
		{name: "across the writer's buffer", held: 60, n: 200, have: 300},
		{name: "longer than both buffers", held: 0, n: 1000, have: 1000},
		{name: "nothing", held: 5, n: 0, have: 0},
		{name: "the source ends first", held: 0, n: 500, have: 300, wantErr: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := valueFor(tt.name, tt.have)
			var out bytes.Buffer
			w := bufio.NewWriterSize(&out, 64)
			w.WriteString(strings.Repeat("h", tt.held))
			err := copyBuffered(w, bufio.NewReaderSize(bytes.NewReader(src), 128), int64(tt.n))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("copyBuffered = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			w.Flush()
			if got, want := out.String(), strings.Repeat("h", tt.held)+string(src[:tt.n]); got != want {
				t.Errorf("the writer got %q, want %q", got, want)
			}
		})
	}
}
