package metacontroller

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/example/memcached-operator/test/testutil"
)

// scanTakes reports whether scan must take b: whether jsontext takes it
// and it is none of what scan leaves to jsontext (an escaped surrogate,
// deep nesting).
func scanTakes(b []byte) bool {
	if !jsontext.Value(b).IsValid() {
		return false
	}
	for _, s := range []string{`\uD`, `\ud`} {
		if bytes.Contains(b, []byte(s)) {
			return false
		}
	}
	return bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) <= scanMaxDepth
}

// TestScan holds scan to jsontext's validation: it takes what jsontext
// takes, and refuses what it refuses.
func TestScan(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{name: "empty", body: ``},
		{name: "white space only", body: " \t\r\n"},
		{name: "literals", body: `[true,false,null]`},
		{name: "white space everywhere", body: " { \"a\" : [ 1 , 2 ] ,\n\t\"b\" : { } , \"c\" : [ ] }\r\n"},
		{name: "numbers", body: `[0,-0,1,-12,0.5,1e3,1E+3,1e-3,-1.25e10]`},
		{name: "leading zero", body: `[01]`},
		{name: "minus alone", body: `-`},
		{name: "fraction without digits", body: `1.`},
		{name: "exponent without digits", body: `1e+`},
		{name: "plus", body: `+1`},
		{name: "hex", body: `0x1`},
		{name: "literal misspelt", body: `[nul]`},
		{name: "literal run on", body: `[truex]`},
		{name: "two values", body: `1 2`},
		{name: "trailing comma in array", body: `[1,]`},
		{name: "trailing comma in object", body: `{"a":1,}`},
		{name: "missing colon", body: `{"a" 1}`},
		{name: "name not a string", body: `{a:1}`},
		{name: "unclosed", body: `{"a":[1`},
		{name: "mismatched", body: `{"a":[1}]`},
		{name: "escapes", body: `["\" \\ \/ \b \f \n \r \t \u0041 \u00e9 \u2028"]`},
		{name: "bad escape", body: `["\q"]`},
		{name: "short unicode escape", body: `["\u12"]`},
		{name: "control character", body: "[\"a\x01b\"]"},
		{name: "DEL", body: "[\"a\x7fb\"]"},
		{name: "UTF-8", body: `["é 日本 😀"]`},
		{name: "invalid UTF-8", body: "[\"\xff\"]"},
		{name: "truncated UTF-8", body: "[\"\xe6\x97\"]"},
		{name: "surrogate in UTF-8", body: "[\"\xed\xa0\x80\"]"},
		{name: "overlong UTF-8", body: "[\"\xc0\xaf\"]"},
		{name: "escaped replacement character", body: `["\ufffd"]`},
		{name: "invalid UTF-8 in a name", body: "{\"\xff\":1}"},
		{name: "duplicate name", body: `{"a":1,"b":2,"a":3}`},
		{name: "duplicate name once unescaped", body: `{"a":1,"\u0061":2}`},
		{name: "escaped names differ", body: `{"a\"":1,"a\\":2,"\"a":3}`},
		{name: "same name in different objects", body: `{"a":{"a":1},"b":{"a":2}}`},
		{name: "names of a closed object freed", body: `{"a":{"b":1},"b":2}`},
		{name: "duplicate in a large object", body: `{` + largeObject(40, 7) + `}`},
		{name: "large object", body: `{` + largeObject(40, -1) + `}`},
		{name: "deep", body: strings.Repeat("[", 100) + strings.Repeat("]", 100)},
		{name: "byte order mark", body: "\ufeff{}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, want := scan([]byte(tt.body)), jsontext.Value(tt.body).IsValid()
			if got != want {
				t.Errorf("scan(%q) = %v, want (jsontext's) %v", tt.body, got, want)
			}
		})
	}
	// What scan leaves to jsontext, which takes it.
	for _, body := range []string{`["\ud83d\ude00"]`, strings.Repeat("[", scanMaxDepth+1) + strings.Repeat("]", scanMaxDepth+1)} {
		if scan([]byte(body)) || !jsontext.Value(body).IsValid() {
			t.Errorf("scan takes %.20q or jsontext does not", body)
		}
	}
	t.Run("captures", func(t *testing.T) {
		for _, rel := range testutil.CaptureNames(t) {
			if body := testutil.LoadCapture(t, rel).Request; !scan([]byte(body)) {
				t.Errorf("scan refuses %s", rel)
			}
		}
	})
	t.Run("1,000 Pods", func(t *testing.T) {
		if !scan(testutil.BigRequest(t, 1000)) {
			t.Error("scan refuses the 1,000-Pod request")
		}
	})
}

// TestScanEnds checks where scan says each object and array ends, and
// which opens next: what the quick reader jumps by.
func TestScanEnds(t *testing.T) {
	body := ` {"a":[1,{},[ ]],"b":{"c":{"d":null}} , "e":[]}`
	s := scanners.Get().(*scanner)
	defer s.free()
	if !s.scan([]byte(body)) {
		t.Fatal("scan refuses it")
	}
	var got []string
	for _, e := range s.ends {
		got = append(got, fmt.Sprintf("%s %d", body[:e.end], e.next))
	}
	want := []string{
		body + " 7",
		` {"a":[1,{},[ ]] 4`,
		` {"a":[1,{} 3`,
		` {"a":[1,{},[ ] 4`,
		` {"a":[1,{},[ ]],"b":{"c":{"d":null}} 6`,
		` {"a":[1,{},[ ]],"b":{"c":{"d":null} 6`,
		` {"a":[1,{},[ ]],"b":{"c":{"d":null}} , "e":[] 7`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("ends:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// largeObject is n members named by number, the one at dup (if any)
// named as the first.
func largeObject(n, dup int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		name := string(rune('a'+i%26)) + string(rune('a'+i/26))
		if i == dup {
			name = "aa"
		}
		b.WriteString(`"` + name + `":` + `{"x":1}`)
	}
	return b.String()
}

// FuzzScan holds scan to jsontext's validation on any bytes: it never
// takes what jsontext refuses, and takes what jsontext takes but for what
// it leaves to jsontext.
func FuzzScan(f *testing.F) {
	f.Add([]byte(`{"a":[1,-2.5e3,true,false,null,"\u0041\n"],"b":{"c":{}},"\u0062x":"é"}`))
	f.Add([]byte(`{"a":1,"\u0061":2}`))
	f.Add(podRequest(`{"a":"b"}`, `{"phase":"Running"}`))
	f.Add([]byte("[\"\\ud83d\\ude00 \xe6\x97\xa5 \\u00e9 \\\\\\\"\", 0.5e-3, -0, 1E+2, {}, [[]], {\"\":\"\"}]"))
	f.Add([]byte(`{"k:{\"uid\":\"x\"}":{},"k:{\"uid\":\"y\"}":{},"f:a":{".":{}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if got := scan(body); got && !jsontext.Value(body).IsValid() || !got && scanTakes(body) {
			t.Errorf("scan(%q) = %v; jsontext's: %v", body, got, jsontext.Value(body).IsValid())
		}
	})
}

// BenchmarkScanPairs times scan against jsontext's validation over the
// same 1,000-Pod request, back to back, and reports the median ratio.
func BenchmarkScanPairs(b *testing.B) {
	body := testutil.BigRequest(b, 1000)
	var ratios []float64
	for b.Loop() {
		t0 := time.Now()
		if !jsontext.Value(body).IsValid() {
			b.Fatal("refused")
		}
		t1 := time.Now()
		if !scan(body) {
			b.Fatal("refused")
		}
		ratios = append(ratios, float64(time.Since(t1))/float64(t1.Sub(t0)))
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "scan/jsontext")
}
