package memcached_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/sync/memcached"
)

// TestExtstoreWithTheOtherFeatures turns extstore on beside each feature
// that changes the memcached Pod template, and checks that every memcached
// Deployment (each zone's with zones) carries what both ask for: the
// extstore volume, mounted in the memcached container, its -o, the
// ephemeral-storage request, and the other feature's own container,
// volume or argument.
func TestExtstoreWithTheOtherFeatures(t *testing.T) {
	const ext = `"extstore":{"size":"1Gi","expectedItemSize":16384}`
	tests := []struct {
		name string
		spec string
		// also holds what the other feature puts in the template.
		also func(t *testing.T, pod corev1.PodSpec)
	}{
		{name: "alone", spec: `{` + ext + `}`},
		{name: "metrics", spec: `{"metrics":{"enabled":true},` + ext + `}`, also: hasContainer("exporter")},
		{name: "tls", spec: `{"tls":{"secretName":"c"},` + ext + `}`, also: hasArg("-Z")},
		{name: "auth", spec: `{"auth":{"secretName":"u"},` + ext + `}`, also: hasArg("-S")},
		{name: "keepWarm", spec: `{"rollout":{"keepWarm":true},` + ext + `}`, also: func(t *testing.T, pod corev1.PodSpec) {
			if pod.Containers[0].Lifecycle.PreStop.Exec == nil {
				t.Errorf("the memcached container has no keepWarm preStop")
			}
		}},
		{name: "stableNames", spec: `{"stableNames":{"enabled":true},` + ext + `}`},
		{name: "discovery", spec: `{"discovery":{"enabled":true},` + ext + `}`},
		{name: "proxy", spec: `{"proxy":{"enabled":true},` + ext + `}`},
		{name: "zones", spec: `{"zones":{"names":["a","b"]},` + ext + `}`, also: func(t *testing.T, pod corev1.PodSpec) {
			if pod.Affinity == nil || pod.Affinity.NodeAffinity == nil {
				t.Errorf("a zone's Pods have no node affinity")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kinds := append(slices.Clone(allKinds), memcached.EndpointSliceKey)
			a := fixture{spec: tt.spec, kinds: kinds}.run(t, fixedNow)
			if d := a.condition(t, "Degraded"); d.Status != "False" {
				t.Fatalf("Degraded %s %s: %s", d.Status, d.Reason, d.Message)
			}
			deployments := a.memcachedDeployments(t)
			if strings.Contains(tt.spec, "zones") && len(deployments) != 2 {
				t.Fatalf("%d memcached Deployments, want one a zone", len(deployments))
			}
			for _, d := range deployments {
				pod := d.Spec.Template.Spec
				mc := pod.Containers[0]
				if mc.Name != "memcached" {
					t.Fatalf("%s: the first container is %s", d.Name, mc.Name)
				}
				var opts []string
				for i, arg := range mc.Args {
					if arg == "-o" && i+1 < len(mc.Args) && strings.HasPrefix(mc.Args[i+1], "ext_path=") {
						opts = append(opts, mc.Args[i+1])
					}
				}
				if len(opts) != 1 || !strings.HasPrefix(opts[0], "ext_path=/run/memcached/extstore/memcached:960m,") {
					t.Errorf("%s: extstore's -o %q, want one, for a file of 960m", d.Name, opts)
				}
				if !slices.ContainsFunc(mc.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == "extstore" && m.MountPath == "/run/memcached/extstore"
				}) {
					t.Errorf("%s: the memcached container does not mount the extstore volume: %+v", d.Name, mc.VolumeMounts)
				}
				if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
					return v.Name == "extstore" && v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.String() == "1Gi"
				}) {
					t.Errorf("%s: no extstore emptyDir of 1Gi: %+v", d.Name, pod.Volumes)
				}
				if got := mc.Resources.Requests[corev1.ResourceEphemeralStorage]; got.String() != "1Gi" {
					t.Errorf("%s: ephemeral-storage request %s, want 1Gi", d.Name, got.String())
				}
				if tt.also != nil {
					tt.also(t, pod)
				}
			}
			if a.status.Extstore == nil || a.status.Extstore.FileMB != 960 {
				t.Errorf("status.extstore %+v, want a file of 960 MiB", a.status.Extstore)
			}
		})
	}
}

// TestExtstoreOnAStorageClass puts the file on a generic ephemeral volume:
// a claim of the size and class, no emptyDir and no ephemeral-storage
// request, and the memcached user's fsGroup so that it may write it.
func TestExtstoreOnAStorageClass(t *testing.T) {
	a := fixture{spec: `{"extstore":{"size":"100Gi","storageClassName":"local-nvme","expectedItemSize":65536},"memcached":{"maxMemoryMB":1024}}`, kinds: allKinds}.run(t, fixedNow)
	pod := a.memcachedDeployments(t)[0].Spec.Template.Spec
	i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "extstore" })
	if i < 0 || pod.Volumes[i].Ephemeral == nil || pod.Volumes[i].EmptyDir != nil {
		t.Fatalf("no generic ephemeral extstore volume: %+v", pod.Volumes)
	}
	claim := pod.Volumes[i].Ephemeral.VolumeClaimTemplate.Spec
	if claim.StorageClassName == nil || *claim.StorageClassName != "local-nvme" || claim.Resources.Requests.Storage().String() != "100Gi" {
		t.Errorf("claim %+v, want 100Gi of local-nvme", claim)
	}
	if _, ok := pod.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage]; ok {
		t.Errorf("an ephemeral-storage request for a disk that is not the node's")
	}
	if pod.SecurityContext.FSGroup == nil || *pod.SecurityContext.FSGroup != 11211 {
		t.Errorf("fsGroup %v, want the memcached user's 11211", pod.SecurityContext.FSGroup)
	}
}

func hasContainer(name string) func(*testing.T, corev1.PodSpec) {
	return func(t *testing.T, pod corev1.PodSpec) {
		t.Helper()
		if !slices.ContainsFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == name }) {
			t.Errorf("no %s container", name)
		}
	}
}

func hasArg(arg string) func(*testing.T, corev1.PodSpec) {
	return func(t *testing.T, pod corev1.PodSpec) {
		t.Helper()
		if !slices.Contains(pod.Containers[0].Args, arg) {
			t.Errorf("memcached's args %q have no %s", pod.Containers[0].Args, arg)
		}
	}
}
