package memcached

import (
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// Metrics: memcached_exporter beside memcached in every Pod, on the
// Service's metrics port, and a Prometheus Operator ServiceMonitor that
// scrapes it.

// ExporterPort is memcached_exporter's, on the Pods and the Service.
const ExporterPort = 9150

type metrics struct{ noFeature }

func metricsEnabled(s *v1alpha1.MemcachedSpec) bool { return s.Metrics != nil && s.Metrics.Enabled }

func wantsServiceMonitor(s *v1alpha1.MemcachedSpec) bool {
	return metricsEnabled(s) && s.Metrics.ServiceMonitor != nil && s.Metrics.ServiceMonitor.Enabled
}

func (metrics) kinds(s *v1alpha1.MemcachedSpec) []string {
	if wantsServiceMonitor(s) {
		return []string{ServiceMonitorKey}
	}
	return nil
}

func (metrics) pod(s *v1alpha1.MemcachedSpec, t *corev1.PodTemplateSpec) {
	if metricsEnabled(s) {
		t.Spec.Containers = append(t.Spec.Containers, exporterContainer(s))
	}
}

func (metrics) children(d *desire) []any {
	if d.managed[ServiceMonitorKey] && wantsServiceMonitor(d.s) {
		return []any{serviceMonitor(d)}
	}
	return nil
}

func exporterContainer(s *v1alpha1.MemcachedSpec) corev1.Container {
	return corev1.Container{
		Name:  "exporter",
		Image: s.Metrics.Image,
		Args: []string{
			"--memcached.address=localhost:" + strconv.Itoa(localPort(s)),
			"--web.listen-address=:" + strconv.Itoa(ExporterPort),
		},
		Ports:           []corev1.ContainerPort{{Name: "metrics", ContainerPort: ExporterPort, Protocol: corev1.ProtocolTCP}},
		Resources:       mergeResources(sidecarResources(), s.Metrics.Resources),
		SecurityContext: restrictedContainer(),
	}
}

// serviceMonitorSpec is the part of a Prometheus Operator ServiceMonitor the
// hook sets; the type is not in k8s.io/api.
type serviceMonitorSpec struct {
	Selector  metav1.LabelSelector     `json:"selector"`
	Endpoints []serviceMonitorEndpoint `json:"endpoints"`
}

type serviceMonitorEndpoint struct {
	Port        string        `json:"port"`
	Interval    string        `json:"interval,omitempty"`
	Relabelings []relabelling `json:"relabelings,omitempty"`
}

// relabelling is a Prometheus relabel_config, as the Prometheus Operator
// spells it: here, a label set to a constant.
type relabelling struct {
	TargetLabel string `json:"targetLabel"`
	Replacement string `json:"replacement"`
}

// MemcachedLabel is the label the ServiceMonitor puts on every series it
// scrapes: the Memcached's name. With the namespace label the Prometheus
// Operator sets, it names the Memcached the series is of, which the
// alerts and the dashboard of manifests/components/prometheusrule and
// dashboard group by (the Service's name, the job label, says it too, but
// only while the Service keeps the Memcached's name).
const MemcachedLabel = "memcached"

func serviceMonitor(d *desire) object[serviceMonitorSpec] {
	sm := d.s.Metrics.ServiceMonitor
	meta := childMeta(d.p)
	labels := maps.Clone(sm.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, meta.Labels)
	meta.Labels = labels
	return object[serviceMonitorSpec]{
		TypeMeta: metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: "ServiceMonitor"},
		Metadata: meta,
		Spec: serviceMonitorSpec{
			Selector: metav1.LabelSelector{MatchLabels: childLabels(d.p.Name)},
			Endpoints: []serviceMonitorEndpoint{{Port: "metrics", Interval: sm.Interval,
				Relabelings: []relabelling{{TargetLabel: MemcachedLabel, Replacement: d.p.Name}}}},
		},
	}
}
