package slots_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/example/memcached-operator/sync/slots"
)

// TestPlaceAgreesWithMemcached checks Place against what memcached 1.6.45's
// own C code computes (testdata/place.txt, written by testdata/place-gen.c
// built with memcached's xxhash.h: key lengths from 10 to 250 bytes, each of
// XXH3's length classes, over 1 to 1,000 slots).
func TestPlaceAgreesWithMemcached(t *testing.T) {
	f, err := os.Open("testdata/place.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			t.Fatalf("bad line %q", sc.Text())
		}
		n, _ := strconv.Atoi(fields[1])
		want, _ := strconv.Atoi(fields[2])
		if got := slots.Place([]byte(fields[0]), n); got != want {
			t.Errorf("Place(%q, %d) = %d, memcached says %d", fields[0], n, got, want)
		}
		lines++
	}
	if lines < 1000 {
		t.Fatalf("only %d vectors", lines)
	}
}

// TestPlaceMovesOnlyToTheNewSlot checks jump hash's promise, which the slot
// table relies on: going from n to n+1 slots, a key either stays or moves
// to the new slot, and about 1/(n+1) of them move.
func TestPlaceMovesOnlyToTheNewSlot(t *testing.T) {
	const keys = 20000
	for _, n := range []int{1, 3, 4, 10} {
		moved := 0
		for i := range keys {
			k := []byte("user:" + strconv.Itoa(i))
			a, b := slots.Place(k, n), slots.Place(k, n+1)
			if a != b {
				moved++
				if b != n {
					t.Fatalf("%q moved from %d to %d going from %d to %d slots", k, a, b, n, n+1)
				}
			}
		}
		if got, want := float64(moved)/keys, 1/float64(n+1); got < want*0.9 || got > want*1.1 {
			t.Errorf("%d to %d slots moved %.3f of the keys, want about %.3f", n, n+1, got, want)
		}
	}
}
