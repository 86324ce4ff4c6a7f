package pool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/cmd/memcached-agent/internal/follow"
	"github.com/example/memcached-operator/sync/api/v1alpha1"
	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/test/testutil"
)

// memcachedWith is Memcached cache in namespace shop with the slot table.
func memcachedWith(tab v1alpha1.SlotTable) *v1alpha1.Memcached {
	m := &v1alpha1.Memcached{}
	m.ObjectMeta = metav1.ObjectMeta{Name: "cache", Namespace: "shop"}
	m.Status.SlotTable = tab
	return m
}

// table is testutil.SlotTable.
var table = testutil.SlotTable

// recorder is an Observer that counts.
type recorder struct {
	mu       sync.Mutex
	wrote    int
	found    int
	failed   int
	refused  map[string]int
	versions []int64
}

func (r *recorder) PoolWritten(p *contract.Pool, wrote bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if wrote {
		r.wrote++
	} else {
		r.found++
	}
	r.versions = append(r.versions, p.Version)
}

func (r *recorder) PoolRefused(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refused == nil {
		r.refused = map[string]int{}
	}
	r.refused[reason]++
}

func (r *recorder) PoolWriteFailed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed++
}

func (r *recorder) counts() (wrote, found, failed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wrote, r.found, r.failed
}

// newWriter is a Writer of dir/pool, logging into log.
func newWriter(dir string, log io.Writer) (*Writer, *recorder) {
	rec := &recorder{}
	logger := slog.New(slog.NewTextHandler(log, nil))
	return New(filepath.Join(dir, "pool"), logger, rec, time.Now), rec
}

// fileState is a pool file's content and identity, to tell a rewrite.
type fileState struct {
	content string
	info    os.FileInfo
}

func stat(t *testing.T, path string) fileState {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fileState{string(b), fi}
}

// TestWriterFollowsTheTable offers a sequence of objects, as the follower
// would, and checks after each what the file holds, whether it was
// written (a rename makes a new file), and what was refused.
func TestWriterFollowsTheTable(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	w, rec := newWriter(dir, &log)
	path := w.Path()
	if w.Current() != nil {
		t.Fatalf("Current() before any offer = %v", w.Current())
	}

	three := table(100, "S:10.0.0.1", "S:10.0.0.2", "S:10.0.0.3")
	// The follower checks the object is the one followed: another is
	// refused, never offered.
	other := &follow.Refusal{Reason: follow.WrongObject, Err: errors.New(`the object is Memcached "other", the agent follows "cache"`)}
	elsewhere := &follow.Refusal{Reason: follow.WrongObject, Err: errors.New(`the object is in namespace "prod", the agent follows "shop"`)}
	steps := []struct {
		name        string
		offer       *v1alpha1.Memcached
		refuse      error
		want        string // the file's content after the step
		wantWrite   bool
		wantRefused string
	}{
		{name: "first table", offer: memcachedWith(three), want: "version 100\n# tables =100\n10.0.0.1:11211\n10.0.0.2:11211\n10.0.0.3:11211\nend 3\n", wantWrite: true},
		{name: "the same table again", offer: memcachedWith(three)},
		{name: "a slot NotReady", offer: memcachedWith(table(101, "S:10.0.0.1", "N:10.0.0.2", "S:10.0.0.3")),
			want: "version 101\n# tables =101\n10.0.0.1:11211\n127.0.0.1:1 _down_1\n10.0.0.3:11211\nend 3\n", wantWrite: true},
		{name: "a slot more, same version (the table grew before its Pod was Ready)", offer: memcachedWith(table(101, "S:10.0.0.1", "N:10.0.0.2", "S:10.0.0.3", "E")),
			want: "version 101\n# tables =101\n10.0.0.1:11211\n127.0.0.1:1 _down_1\n10.0.0.3:11211\n127.0.0.1:1 _down_3\nend 4\n", wantWrite: true},
		{name: "every slot down", offer: memcachedWith(table(102, "N:10.0.0.1", "E", "E")),
			want: "version 102\n# tables =102\n127.0.0.1:1 _down_0\n127.0.0.1:1 _down_1\n127.0.0.1:1 _down_2\nend 3\n", wantWrite: true},
		{name: "a leaving Pod, and a Pod filled from one, are served from the Pod that holds the keys", offer: memcachedWith(table(102, "L:10.0.0.1", "E", "F:10.0.0.4<10.0.0.3")),
			want: "version 102\n# tables =102\n10.0.0.1:11211\n127.0.0.1:1 _down_1\n10.0.0.3:11211\nend 3\n", wantWrite: true},
		{name: "back", offer: memcachedWith(table(103, "S:10.0.0.1", "S:10.0.0.2", "S:10.0.0.3")),
			want: "version 103\n# tables =103\n10.0.0.1:11211\n10.0.0.2:11211\n10.0.0.3:11211\nend 3\n", wantWrite: true},
		{name: "another Memcached", refuse: other, wantRefused: WrongObject},
		{name: "another namespace", refuse: elsewhere, wantRefused: WrongObject},
		{name: "a bad address", offer: memcachedWith(table(104, "S:10.0.0.1", "S:not-an-ip")), wantRefused: BadAddress},
		{name: "a negative version", offer: memcachedWith(table(-5, "S:10.0.0.1")), wantRefused: BadVersion},
		{name: "an unreadable object", refuse: errors.New("cache.json: invalid character"), wantRefused: Unreadable},
		{name: "a lower version is written: the proxy follows the table, not the version", offer: memcachedWith(table(50, "S:10.0.0.1")),
			want: "version 50\n# tables =50\n10.0.0.1:11211\nend 1\n", wantWrite: true},
		{name: "only the version changed", offer: memcachedWith(table(51, "S:10.0.0.1")),
			want: "version 51\n# tables =51\n10.0.0.1:11211\nend 1\n", wantWrite: true},
		{name: "no slot", offer: memcachedWith(table(52)),
			want: "version 52\n# tables =52\n127.0.0.1:1 _down_0\nend 1\n", wantWrite: true},
	}
	var before fileState
	for i, st := range steps {
		wrote, _, _ := rec.counts()
		refusedBefore := rec.refused[st.wantRefused]
		if st.refuse != nil {
			w.Refuse("file", st.refuse)
		} else {
			w.Offer("file", st.offer)
		}
		after := stat(t, path)
		nowWrote, _, _ := rec.counts()
		switch {
		case st.wantWrite && (nowWrote != wrote+1 || (i > 0 && os.SameFile(before.info, after.info))):
			t.Errorf("%s: the file was not written (writes %d -> %d)", st.name, wrote, nowWrote)
		case !st.wantWrite && (nowWrote != wrote || !os.SameFile(before.info, after.info)):
			t.Errorf("%s: the file was written", st.name)
		}
		want := st.want
		if want == "" {
			want = before.content
		}
		if after.content != want {
			t.Errorf("%s: the file holds\n%s\nwant\n%s", st.name, after.content, want)
		}
		if st.wantRefused != "" && rec.refused[st.wantRefused] != refusedBefore+1 {
			t.Errorf("%s: refusals %v, want one more %s", st.name, rec.refused, st.wantRefused)
		}
		if mode := after.info.Mode().Perm(); mode != 0o644 {
			t.Errorf("%s: the file's mode is %v, want 0644 (the proxy runs as another user)", st.name, mode)
		}
		cur := w.Current()
		if cur == nil || !strings.HasPrefix(after.content, "version ") || !strings.Contains(after.content, "\nend ") {
			t.Fatalf("%s: Current() = %v with the file\n%s", st.name, cur, after.content)
		}
		before = after
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d files, want only the pool (no temporary file left)", len(entries))
	}
	if n := strings.Count(log.String(), "reason=bad_address"); n != 1 {
		t.Errorf("the bad address was logged %d times, want once:\n%s", n, log.String())
	}
}

// TestWriterLogsAProblemOnce offers the same bad table three times.
func TestWriterLogsAProblemOnce(t *testing.T) {
	var log bytes.Buffer
	w, rec := newWriter(t.TempDir(), &log)
	for range 3 {
		w.Offer("watch", memcachedWith(table(5, "S:10.0.0.1", "S:10.0.0.1")))
	}
	if n := strings.Count(log.String(), "slot table refused"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, log.String())
	}
	if rec.refused[BadAddress] != 3 {
		t.Errorf("counted %v, want 3 bad_address", rec.refused)
	}
	if !strings.Contains(log.String(), "none yet: the proxy fails every request") {
		t.Errorf("the log does not say there is no pool yet:\n%s", log.String())
	}
	if w.Current() != nil {
		t.Errorf("Current() = %v after refusals only", w.Current())
	}
	if _, err := os.Stat(w.Path()); !os.IsNotExist(err) {
		t.Errorf("a pool file was written: %v", err)
	}
}

// TestWriterFindsItsPool starts a writer where the file holds the pool
// already (the agent's container restarted, the emptyDir stayed): it is
// not written again, and the writer has a pool at once. A file with the
// same bytes but a mode the proxy cannot read is written again.
func TestWriterFindsItsPool(t *testing.T) {
	tab := table(7, "S:10.0.0.1", "S:10.0.0.2")
	p, _ := contract.RenderPool([]v1alpha1.ZoneStatus{{SlotTable: tab}})
	for _, tt := range []struct {
		name      string
		mode      os.FileMode
		wantWrite bool
	}{
		{name: "same bytes, readable by all", mode: 0o644, wantWrite: false},
		{name: "same bytes, readable by its owner only", mode: 0o600, wantWrite: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var log bytes.Buffer
			w, rec := newWriter(dir, &log)
			if err := os.WriteFile(w.Path(), p.Content, tt.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(w.Path(), tt.mode)
			before := stat(t, w.Path())
			w.Offer("file", memcachedWith(tab))
			after := stat(t, w.Path())
			wrote, found, _ := rec.counts()
			if rewritten := !os.SameFile(before.info, after.info); rewritten != tt.wantWrite || (wrote == 1) != tt.wantWrite || (found == 1) == tt.wantWrite {
				t.Errorf("rewritten %v (writes %d, found %d), want %v", rewritten, wrote, found, tt.wantWrite)
			}
			if after.info.Mode().Perm() != 0o644 || after.content != string(p.Content) {
				t.Errorf("the file is %v:\n%s", after.info.Mode(), after.content)
			}
			if cur := w.Current(); cur == nil || cur.Version != 7 || cur.Slots != 2 {
				t.Errorf("Current() = %+v", cur)
			}
		})
	}
}

// TestWriterRetries offers a table while the file cannot be written (its
// directory is missing): nothing is written and the failure is counted;
// once the directory exists, Run writes it without another offer.
func TestWriterRetries(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	// Run logs from a goroutine of its own while the test reads.
	var log testutil.LockedBuffer
	w, rec := newWriter(dir, &log)
	w.Offer("file", memcachedWith(table(9, "S:10.0.0.1")))
	if _, _, failed := rec.counts(); failed != 1 || w.Current() != nil {
		t.Fatalf("failures %d, Current() %v: want 1 and nil", failed, w.Current())
	}
	if !strings.Contains(log.String(), "cannot write the pool file") {
		t.Errorf("the failure is not logged:\n%s", log.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyEvery(t, 5*RetryInterval, 10*time.Millisecond, func() error {
		if w.Current() == nil {
			return fmt.Errorf("not written since the directory appeared:\n%s", log.String())
		}
		return nil
	})
	if got := stat(t, w.Path()).content; got != "version 9\n# tables =9\n10.0.0.1:11211\nend 1\n" {
		t.Errorf("the file holds %q", got)
	}
}

// memcachedWithZones is Memcached cache in namespace shop with the zones'
// tables, given as zone name then table.
func memcachedWithZones(zones ...any) *v1alpha1.Memcached {
	m := memcachedWith(v1alpha1.SlotTable{})
	for i := 0; i < len(zones); i += 2 {
		m.Status.Zones = append(m.Status.Zones, v1alpha1.ZoneStatus{Name: zones[i].(string), SlotTable: zones[i+1].(v1alpha1.SlotTable)})
	}
	return m
}

// TestWriterFollowsTheZones offers objects with zones, and without, and
// checks what the file holds after each, what Current says and what was
// refused: with zones the file holds every zone's table; a Memcached that
// turns zones off gets the pool without zones back.
func TestWriterFollowsTheZones(t *testing.T) {
	var log bytes.Buffer
	w, rec := newWriter(t.TempDir(), &log)
	steps := []struct {
		name        string
		offer       *v1alpha1.Memcached
		want        string // the file's content after the step
		wantSlots   int
		wantDown    int
		wantRefused string
	}{
		{name: "three zones", offer: memcachedWithZones("a", table(5, "S:10.0.1.1"), "b", table(6, "S:10.0.2.1"), "c", table(4, "N:10.0.3.1")),
			want: "version 6\n# tables a=5 b=6 c=4\nzone a\n10.0.1.1:11211\nzone b\n10.0.2.1:11211\nzone c\n127.0.0.1:1 _down_c_0\nend 3\n", wantSlots: 3, wantDown: 1},
		{name: "a zone's slot Serving", offer: memcachedWithZones("a", table(5, "S:10.0.1.1"), "b", table(6, "S:10.0.2.1"), "c", table(7, "S:10.0.3.1")),
			want: "version 7\n# tables a=5 b=6 c=7\nzone a\n10.0.1.1:11211\nzone b\n10.0.2.1:11211\nzone c\n10.0.3.1:11211\nend 3\n", wantSlots: 3},
		{name: "an address Serving in two zones", offer: memcachedWithZones("a", table(8, "S:10.0.1.1"), "b", table(8, "S:10.0.1.1")), wantRefused: BadAddress},
		{name: "a zone listed twice", offer: memcachedWithZones("a", table(8, "S:10.0.1.1"), "a", table(8, "S:10.0.1.2")), wantRefused: BadZone},
		{name: "zones off: the slot table again", offer: memcachedWith(table(9, "S:10.0.0.1")),
			want: "version 9\n# tables =9\n10.0.0.1:11211\nend 1\n", wantSlots: 1},
		{name: "zones on, their tables empty yet", offer: memcachedWithZones("a", v1alpha1.SlotTable{}, "b", v1alpha1.SlotTable{}),
			want: "version 0\n# tables a=0 b=0\nzone a\n127.0.0.1:1 _down_a_0\nzone b\n127.0.0.1:1 _down_b_0\nend 2\n", wantSlots: 2, wantDown: 2},
	}
	var before string
	for _, st := range steps {
		refusedBefore := rec.refused[st.wantRefused]
		w.Offer("file", st.offer)
		got := stat(t, w.Path()).content
		want := st.want
		if want == "" {
			want = before
		}
		if got != want {
			t.Errorf("%s: the file holds\n%s\nwant\n%s", st.name, got, want)
		}
		if st.wantRefused != "" {
			if rec.refused[st.wantRefused] != refusedBefore+1 {
				t.Errorf("%s: refusals %v, want one more %s", st.name, rec.refused, st.wantRefused)
			}
		} else if cur := w.Current(); cur.Slots != st.wantSlots || cur.Down != st.wantDown {
			t.Errorf("%s: Current() says %d slots, %d down; want %d, %d", st.name, cur.Slots, cur.Down, st.wantSlots, st.wantDown)
		}
		before = got
	}
}
