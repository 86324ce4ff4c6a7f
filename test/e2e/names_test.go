package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// namesStatus is what testStableNames reads of a Memcached.
type namesStatus struct {
	Status struct {
		SlotTable     v1alpha1.SlotTable `json:"slotTable"`
		SlotAddresses []string           `json:"slotAddresses"`
	} `json:"status"`
}

// testStableNames checks spec.stableNames against the real API server, with
// the EndpointSlice controller running: the Service NAME-slots without a
// selector, its EndpointSlice naming each slot's Pod as NAME-N in slot
// order, left alone by the EndpointSlice controller, status.slotAddresses,
// and, when the Pod of slot 1 is deleted, its name following the Pod that
// takes the slot while the other names stay.
func testStableNames(s *scenario) {
	const name = "names"
	s.create(name, "{size: 3, stableNames: {enabled: true}}")
	s.waitConverged(name, 3, "")

	var svc corev1.Service
	s.getJSON(&svc, "service", name+"-slots")
	if svc.Spec.Selector != nil || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		s.t.Errorf("Service %s-slots: selector %v, clusterIP %q, publishNotReadyAddresses %v; want none, None, true",
			name, svc.Spec.Selector, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}

	// names reads the Memcached and its EndpointSlice, and says how the
	// slice differs from the slot table, if it does.
	names := func() (namesStatus, discoveryv1.EndpointSlice, error) {
		var m namesStatus
		var slice discoveryv1.EndpointSlice
		b, ok := s.fetch("memcached", name)
		if !ok {
			return m, slice, fmt.Errorf("no Memcached %s", name)
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return m, slice, err
		}
		b, ok = s.fetch("endpointslice", name+"-slots")
		if !ok {
			return m, slice, fmt.Errorf("no EndpointSlice %s-slots", name)
		}
		if err := json.Unmarshal(b, &slice); err != nil {
			return m, slice, err
		}
		return m, slice, slotsMatch(name, s.ns, m, slice)
	}
	var before namesStatus
	s.poll("the EndpointSlice names the slot table's Pods", convergeTimeout, func() (err error) {
		before, _, err = names()
		return err
	})

	// The EndpointSlice controller made no slice of its own for the
	// Service (it has no selector) and left ours as the hook wrote it.
	var list struct {
		Items []discoveryv1.EndpointSlice `json:"items"`
	}
	s.getJSON(&list, "endpointslices", "-l", discoveryv1.LabelServiceName+"="+name+"-slots")
	if len(list.Items) != 1 || list.Items[0].Name != name+"-slots" {
		s.t.Errorf("EndpointSlices of Service %s-slots: %d, want only the hook's", name, len(list.Items))
	}
	for _, sl := range list.Items {
		if got := sl.Labels[discoveryv1.LabelManagedBy]; got != "memcached-operator.cache.example.com" {
			s.t.Errorf("EndpointSlice %s is managed by %q, want the operator", sl.Name, got)
		}
	}

	victim := before.Status.SlotTable.Slots[1].Pod
	began := time.Now()
	s.kubectl("delete", "pod", victim, "--wait=false")
	var after namesStatus
	s.poll("slot 1's name follows the Pod that takes the slot", convergeTimeout, func() error {
		m, _, err := names()
		if err != nil {
			return err
		}
		if p := m.Status.SlotTable.Slots[1]; p.Pod == victim || p.State != v1alpha1.SlotServing {
			return fmt.Errorf("slot 1 is %s's (%s)", p.Pod, p.State)
		}
		after = m
		return nil
	})
	record(s.t, "stable-name-follows-replacement/size-3", time.Since(began), s.callsSince(began))
	for _, i := range []int{0, 2} {
		if got, want := after.Status.SlotTable.Slots[i], before.Status.SlotTable.Slots[i]; got.Pod != want.Pod || got.IP != want.IP {
			s.t.Errorf("slot %d went from %s (%s) to %s (%s) when slot 1's Pod was replaced", i, want.Pod, want.IP, got.Pod, got.IP)
		}
	}
	if !slices.Equal(after.Status.SlotAddresses, before.Status.SlotAddresses) {
		s.t.Errorf("slotAddresses went from %q to %q", before.Status.SlotAddresses, after.Status.SlotAddresses)
	}
}

// slotsMatch says how an EndpointSlice differs from the slot table it
// should follow, with every slot Serving, and the status's addresses from
// the names.
func slotsMatch(name, ns string, m namesStatus, slice discoveryv1.EndpointSlice) error {
	slots := m.Status.SlotTable.Slots
	if len(slots) != 3 || len(slice.Endpoints) != len(slots) {
		return fmt.Errorf("%d slots, %d endpoints, want 3 of each", len(slots), len(slice.Endpoints))
	}
	for i, e := range slots {
		ep := slice.Endpoints[i]
		host := name + "-" + strconv.Itoa(i)
		switch {
		case e.State != v1alpha1.SlotServing:
			return fmt.Errorf("slot %d is %s", i, e.State)
		case ep.Hostname == nil || *ep.Hostname != host:
			return fmt.Errorf("endpoint %d has hostname %v, want %s", i, ep.Hostname, host)
		case len(ep.Addresses) != 1 || ep.Addresses[0] != e.IP:
			return fmt.Errorf("endpoint %s has addresses %v, want slot %d's %s", host, ep.Addresses, i, e.IP)
		case ep.TargetRef == nil || ep.TargetRef.Name != e.Pod:
			return fmt.Errorf("endpoint %s points at %v, want Pod %s", host, ep.TargetRef, e.Pod)
		case ep.Conditions.Ready == nil || !*ep.Conditions.Ready:
			return fmt.Errorf("endpoint %s is not ready", host)
		}
		if want := host + "." + name + "-slots." + ns + ".svc:11211"; i >= len(m.Status.SlotAddresses) || m.Status.SlotAddresses[i] != want {
			return fmt.Errorf("slotAddresses %q, want %s at %d", m.Status.SlotAddresses, want, i)
		}
	}
	return nil
}
