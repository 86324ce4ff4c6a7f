package memcached

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// Extstore (spec.extstore): memcached keeps items' values in a file on a
// disk of the Pod's own, and their keys and headers in RAM. The file lives
// as long as the Pod: memcached starts with an empty extstore whatever the
// disk holds, so a volume that outlived the Pod would buy nothing. The
// sizes and the rules that refuse what memcached would not start with are
// in sync/api/v1alpha1 (extstore.go); the memory request counts the write
// buffers (v1alpha1.MemoryOf).

// extstoreDir is where the extstore volume is mounted in the memcached
// container, beside the TLS and authentication volumes, and extstoreFile
// the file memcached makes there.
const (
	extstoreDir    = "/run/memcached/extstore"
	extstoreFile   = extstoreDir + "/memcached"
	extstoreVolume = "extstore"
	// extstoreMaxSleepMicros is ext_max_sleep: the flusher wakes at least
	// every 10 ms rather than every second, which kept a 50 MB/s writer
	// from evicting items before they were flushed (measured, with the
	// other defaults of spec.extstore).
	extstoreMaxSleepMicros = 10000
)

type extstore struct{ noFeature }

// args turn extstore on, with the spec's tuning, in one -o.
func (extstore) args(s *v1alpha1.MemcachedSpec) []string {
	e := s.Extstore
	if e == nil {
		return nil
	}
	free := strconv.FormatFloat(float64(*e.SlabAutomoveFreePercent)/100, 'f', 2, 64)
	return []string{"-o", fmt.Sprintf(
		"ext_path=%s:%dm,ext_wbuf_size=%d,ext_threads=%d,ext_item_size=%d,ext_item_age=%d,ext_max_sleep=%d,slab_automove_freeratio=%s,ext_recache_rate=%d",
		extstoreFile, v1alpha1.ExtstoreFileMiB(s), *e.WriteBufferMB, *e.Threads, *e.MinItemSize, *e.ItemAgeSeconds,
		extstoreMaxSleepMicros, free, *e.RecacheRate)}
}

// pod gives memcached its disk: an emptyDir on the node's disk, bounded
// by sizeLimit and requested as ephemeral storage so that the scheduler
// counts it and the kubelet does not evict the Pod for it; or a generic
// ephemeral volume of the storage class, which the memcached user may
// write through the Pod's fsGroup.
func (extstore) pod(s *v1alpha1.MemcachedSpec, t *corev1.PodTemplateSpec) {
	e := s.Extstore
	if e == nil {
		return
	}
	size := *resource.NewQuantity(e.Size.Value(), resource.BinarySI)
	c := container(t, "memcached")
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: extstoreVolume, MountPath: extstoreDir})
	v := corev1.Volume{Name: extstoreVolume}
	if e.StorageClassName == nil {
		v.EmptyDir = &corev1.EmptyDirVolumeSource{SizeLimit: &size}
		if _, set := c.Resources.Requests[corev1.ResourceEphemeralStorage]; !set {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[corev1.ResourceEphemeralStorage] = size
		}
	} else {
		v.Ephemeral = &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: e.StorageClassName,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			},
		}}
		t.Spec.SecurityContext.FSGroup = ptr(int64(memcachedUID))
	}
	t.Spec.Volumes = append(t.Spec.Volumes, v)
}

// report says how large the file is, and how much of maxMemoryMB the
// headers of a full file take; an invalid spec keeps what the status
// said.
func (extstore) report(pl *plan, st *v1alpha1.MemcachedStatus) {
	switch {
	case pl.spec == nil:
		st.Extstore = pl.p.Status.Extstore
	case pl.spec.Extstore != nil:
		st.Extstore = &v1alpha1.ExtstoreStatus{FileMB: v1alpha1.ExtstoreFileMiB(pl.spec), HeadersMB: v1alpha1.ExtstoreHeadersMiB(pl.spec)}
	}
}
