package testutil

import (
	"fmt"
	"strings"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// SlotTable is a slot table of version written compactly, as the tests of
// the pool file and of its writer read: each state is "S:ip" (Serving),
// "N:ip" (NotReady), "L:ip" (Leaving), "F:ip<from" (Filling: Pod
// cache-SLOT at ip, filled from cache-SLOT-old at from) or "E" (Empty), in
// slot order; a slot with an ip is Pod cache-SLOT's.
func SlotTable(version int64, states ...string) v1alpha1.SlotTable {
	t := v1alpha1.SlotTable{Version: version, Slots: []v1alpha1.Slot{}}
	for i, s := range states {
		kind, ip, _ := strings.Cut(s, ":")
		e := v1alpha1.Slot{Slot: int32(i), IP: ip, State: v1alpha1.SlotEmpty}
		if ip != "" {
			e.Pod = fmt.Sprintf("cache-%d", i)
		}
		switch kind {
		case "S":
			e.State = v1alpha1.SlotServing
		case "N":
			e.State = v1alpha1.SlotNotReady
		case "L":
			e.State = v1alpha1.SlotLeaving
		case "F":
			e.State = v1alpha1.SlotFilling
			e.IP, e.FromIP, _ = strings.Cut(ip, "<")
			e.From = fmt.Sprintf("cache-%d-old", i)
		}
		t.Slots = append(t.Slots, e)
	}
	return t
}
