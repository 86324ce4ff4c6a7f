package v1alpha1

import (
	"fmt"
	"slices"
)

// Extstore (spec.extstore): memcached 1.6.45's extstore, as read in its
// storage.c and extstore.c and tried on the build make test runs. The
// numbers below are its, or measured; the API reference's "Extstore"
// section says what they mean for a user.
const (
	// ExtstorePageMiB is extstore's page (ext_page_size, left at its
	// default): the file is used in whole pages, and a write buffer must
	// divide one.
	ExtstorePageMiB = 64
	// extstoreMinPages is the fewest pages a file may have: memcached
	// compacts and drops pages once fewer than 1 % (at least one) are
	// free, and a file of a page or two would do nothing else.
	extstoreMinPages = 4
	// extstoreWriteBuffers are the write buffers memcached allocates
	// outside -m: one per page bucket (PAGE_BUCKET_COUNT, 6) and one for
	// compaction.
	extstoreWriteBuffers = 7
	// extstoreThreadMiB is an IO thread's memory (its stack and queue),
	// an upper bound.
	extstoreThreadMiB = 1
	// extstoreHeaderBytes is what an item on disk keeps in RAM: its
	// header, key and disk pointer (about 100 to 150 bytes), in the slab
	// chunk they round up to (152 with the default growth factor).
	extstoreHeaderBytes = 152
)

// The defaults of spec.extstore (each one's reason is its field's doc).
const (
	DefaultExtstoreWriteBufferMB    = 8
	DefaultExtstoreThreads          = 4
	DefaultExtstoreMinItemSize      = 512
	DefaultExtstoreItemAgeSeconds   = 0
	DefaultExtstoreFreePercent      = 10
	DefaultExtstoreRecacheRate      = 0
	extstoreMaxSize                 = 64 << 40 // 64 TiB: far past any one disk
	extstoreMaxItemSize             = 1 << 30
	extstoreMaxThreads              = 64
	extstoreMaxFreePercent          = 50
	extstoreMaxRecacheRate          = 1 << 20
	extstoreMaxItemAgeSeconds       = 30 * 24 * 3600
	extstoreWriteBufferChoicesNotes = "2, 4, 8, 16, 32 or 64"
)

// extstoreWriteBufferChoices divide the 64 MiB page in multiples of 2 MiB,
// as extstore.c requires.
var extstoreWriteBufferChoices = []int32{2, 4, 8, 16, 32, 64}

// defaultExtstore fills spec.extstore's left-out fields.
func defaultExtstore(e *ExtstoreSpec) {
	set := func(p **int32, v int32) {
		if *p == nil {
			*p = &v
		}
	}
	set(&e.WriteBufferMB, DefaultExtstoreWriteBufferMB)
	set(&e.Threads, DefaultExtstoreThreads)
	set(&e.MinItemSize, DefaultExtstoreMinItemSize)
	set(&e.ItemAgeSeconds, DefaultExtstoreItemAgeSeconds)
	set(&e.SlabAutomoveFreePercent, DefaultExtstoreFreePercent)
	set(&e.RecacheRate, DefaultExtstoreRecacheRate)
	if e.ExpectedItemSize == nil {
		v := *e.MinItemSize
		e.ExpectedItemSize = &v
	}
}

// ExtstoreFileMiB is the extstore file's size for a spec with its
// defaults: the disk's whole pages less one, left to the filesystem and
// the kubelet's rounding (0 without extstore).
func ExtstoreFileMiB(s *MemcachedSpec) int64 {
	if s.Extstore == nil {
		return 0
	}
	pages := s.Extstore.Size.Value()>>20/ExtstorePageMiB - 1
	return max(pages, 0) * ExtstorePageMiB
}

// ExtstoreHeadersMiB is the RAM, within -m, the headers of a full file
// take at the expected item size, rounded up.
func ExtstoreHeadersMiB(s *MemcachedSpec) int64 {
	if s.Extstore == nil {
		return 0
	}
	size := max(int64(*s.Extstore.ExpectedItemSize), 1)
	items := (ExtstoreFileMiB(s) << 20) / size
	return ceilDiv(items*extstoreHeaderBytes, 1<<20)
}

// ExtstoreMemoryMiB is what extstore needs outside -m: its write buffers
// and IO threads. MemoryOf adds it.
func ExtstoreMemoryMiB(s *MemcachedSpec) int64 {
	if s.Extstore == nil {
		return 0
	}
	return extstoreWriteBuffers*int64(*s.Extstore.WriteBufferMB) + extstoreThreadMiB*int64(*s.Extstore.Threads)
}

// extstoreCEL are the CEL expressions of the extstore's sizes, with self
// at spec, reading the left-out fields as their defaults (the API server
// does not know them).
func extstoreCEL() (wbuf, file, itemSize string) {
	or := func(f string, def int) string {
		return fmt.Sprintf("(has(self.extstore.%[1]s) ? self.extstore.%[1]s : %[2]d)", f, def)
	}
	wbuf = or("writeBufferMB", DefaultExtstoreWriteBufferMB)
	file = fmt.Sprintf("((%s / %d - 1) * %d)", quantityBytes("self.extstore.size"), ExtstorePageMiB<<20, ExtstorePageMiB<<20)
	size := fmt.Sprintf("(has(self.extstore.expectedItemSize) ? self.extstore.expectedItemSize : %s)",
		or("minItemSize", DefaultExtstoreMinItemSize))
	itemSize = fmt.Sprintf("(%[1]s > 0 ? %[1]s : 1)", size)
	return wbuf, file, itemSize
}

// extstoreRules are spec.extstore's: each field's bounds, and how it must
// fit memcached's other settings.
var extstoreRules = func() []Rule {
	get := func(s *MemcachedSpec) *ExtstoreSpec { return s.Extstore }
	wbuf, file, itemSize := extstoreCEL()
	minSize := int64(extstoreMinPages+1) * ExtstorePageMiB << 20
	return []Rule{{
		On:    "spec.extstore",
		Field: ".size",
		CEL: fmt.Sprintf("%s && %s >= %d && %s <= %d", isBytes("self.size"), quantityBytes("self.size"), minSize,
			quantityBytes("self.size"), int64(extstoreMaxSize)),
		Message: fmt.Sprintf("extstore.size must be from %s to %s: the file takes the disk's whole %d MiB pages less one, and needs %d",
			binary(minSize), binary(extstoreMaxSize), ExtstorePageMiB, extstoreMinPages),
		Holds: func(m *Memcached) bool {
			e := m.Spec.Extstore
			if e == nil {
				return true
			}
			b, ok := wholeBytes(e.Size)
			return ok && b >= minSize && b <= extstoreMaxSize
		},
	}, {
		On:      "spec.extstore.writeBufferMB",
		CEL:     fmt.Sprintf("self in %s", celIntList(extstoreWriteBufferChoices)),
		Message: "extstore.writeBufferMB must be " + extstoreWriteBufferChoicesNotes + ": a multiple of 2 that divides the 64 MiB page, or memcached refuses to start",
		Holds: func(m *Memcached) bool {
			e := m.Spec.Extstore
			return e == nil || e.WriteBufferMB == nil || slices.Contains(extstoreWriteBufferChoices, *e.WriteBufferMB)
		},
	},
		intRule("extstore", get, "threads", 1, extstoreMaxThreads, func(e *ExtstoreSpec) *int32 { return e.Threads }),
		intRule("extstore", get, "minItemSize", 0, extstoreMaxItemSize, func(e *ExtstoreSpec) *int32 { return e.MinItemSize }),
		intRule("extstore", get, "itemAgeSeconds", 0, extstoreMaxItemAgeSeconds, func(e *ExtstoreSpec) *int32 { return e.ItemAgeSeconds }),
		intRule("extstore", get, "slabAutomoveFreePercent", 0, extstoreMaxFreePercent, func(e *ExtstoreSpec) *int32 { return e.SlabAutomoveFreePercent }),
		intRule("extstore", get, "recacheRate", 0, extstoreMaxRecacheRate, func(e *ExtstoreSpec) *int32 { return e.RecacheRate }),
		intRule("extstore", get, "expectedItemSize", 1, extstoreMaxItemSize, func(e *ExtstoreSpec) *int32 { return e.ExpectedItemSize }),
		{
			On:    "spec",
			Field: ".extstore.writeBufferMB",
			CEL: fmt.Sprintf("!has(self.extstore) || !(%s) || !(%s) || %s <= %s * %d",
				defaulted("self.memcached.maxItemSize"), isBytes("self.memcached.maxItemSize"), quantityBytes("self.memcached.maxItemSize"), wbuf, 1<<20),
			Message: "extstore.writeBufferMB must be at least memcached.maxItemSize, or memcached refuses to start (-I cannot be larger than ext_wbuf_size)",
			Holds: func(m *Memcached) bool {
				e := m.Spec.Extstore
				if e == nil || e.WriteBufferMB == nil {
					return true
				}
				b, ok := wholeBytes(*m.Spec.Memcached.MaxItemSize)
				return !ok || b <= int64(*e.WriteBufferMB)<<20
			},
		}, {
			On:    "spec",
			Field: ".extstore.size",
			CEL: fmt.Sprintf("!has(self.extstore) || !(%s) || !(%s) || %s < %d || %s / %s * %d <= self.memcached.maxMemoryMB * %d",
				defaulted("self.memcached.maxMemoryMB"), isBytes("self.extstore.size"), quantityBytes("self.extstore.size"), minSize,
				file, itemSize, extstoreHeaderBytes, 1<<19),
			Message: fmt.Sprintf("extstore.size is too large for memcached.maxMemoryMB: every item on disk keeps %d bytes in RAM, and a full disk's at extstore.expectedItemSize (minItemSize when left out) must take at most half of maxMemoryMB (status.extstore.headersMB says how much)", extstoreHeaderBytes),
			Holds: func(m *Memcached) bool {
				e := m.Spec.Extstore
				if e == nil || e.ExpectedItemSize == nil {
					return true
				}
				if b, ok := wholeBytes(e.Size); !ok || b < minSize {
					return true // the size's own rule says why
				}
				items := (ExtstoreFileMiB(&m.Spec) << 20) / max(int64(*e.ExpectedItemSize), 1)
				return items*extstoreHeaderBytes <= int64(*m.Spec.Memcached.MaxMemoryMB)<<19
			},
		},
	}
}()

// celIntList writes a list of integers as CEL does: [2, 4, 8].
func celIntList(vs []int32) string {
	s := "["
	for i, v := range vs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(v)
	}
	return s + "]"
}
