package memcachedtest

import (
	"net"
	"testing"
)

// TestConnAnswer holds Answer to reading each shape of answer whole, and
// no further: what a server writes after it stays for the next.
func TestConnAnswer(t *testing.T) {
	tests := []struct {
		name    string
		written string
		want    string
		wantErr bool
	}{
		{name: "one line", written: "STORED\r\nnext\r\n", want: "STORED\r\n"},
		{name: "a miss", written: "END\r\nnext\r\n", want: "END\r\n"},
		{name: "mg's value, CR LF inside", written: "VA 4 f1 t-1\r\nab\r\n\r\nnext\r\n", want: "VA 4 f1 t-1\r\nab\r\n\r\n"},
		{name: "get's values with a CAS", written: "VALUE a 0 3 9\r\nEND\r\nVALUE b 1 1\r\nx\r\nEND\r\nnext\r\n", want: "VALUE a 0 3 9\r\nEND\r\nVALUE b 1 1\r\nx\r\nEND\r\n"},
		{name: "the endpoint's list", written: "CONFIG cluster 0 12\r\n1\nh|10.0.0.1\r\nEND\r\nnext\r\n", want: "CONFIG cluster 0 12\r\n1\nh|10.0.0.1\r\nEND\r\n"},
		{name: "stats", written: "STAT pid 1\r\nSTAT uptime 2\r\nEND\r\nnext\r\n", want: "STAT pid 1\r\nSTAT uptime 2\r\nEND\r\n"},
		{name: "an error among values", written: "VALUE a 0 1\r\nx\r\nSERVER_ERROR out of memory\r\n", want: "VALUE a 0 1\r\nx\r\nSERVER_ERROR out of memory\r\n", wantErr: true},
		{name: "cut short", written: "VA 10\r\nabc", want: "VA 10\r\nabc", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			go func() {
				server.Write([]byte(tt.written))
				server.Close()
			}()
			c := NewConn(client)
			got, err := c.Answer()
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Fatalf("Answer = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if next, err := c.Answer(); next != "next\r\n" {
				t.Errorf("the next answer = %q, %v; want %q", next, err, "next\r\n")
			}
		})
	}
}

func TestParseStats(t *testing.T) {
	got := parseStats("STAT pid 12\r\nSTAT version 1.6.45\r\nSTAT rusage_user 0.1 x\r\nEND\r\n")
	want := map[string]string{"pid": "12", "version": "1.6.45", "rusage_user": "0.1 x"}
	if len(got) != len(want) {
		t.Fatalf("parseStats = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("parseStats[%s] = %q, want %q", k, got[k], v)
		}
	}
}
