package memcached_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/example/memcached-operator/sync/memcached"
)

// defaultArgs are memcached's arguments for the default settings, before
// TLS and authentication.
var defaultArgs = []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1m"}

// TestSecurityArgs checks memcached's arguments for TLS and authentication:
// the Secret's files by path under /run/memcached, never their contents; a
// single -l with TLS on every address and plain text on loopback's 11212;
// client certificates verified only when required.
func TestSecurityArgs(t *testing.T) {
	tlsArgs := func(opts string) []string {
		return []string{"-Z", "-o", opts, "-l", "*,notls:127.0.0.1:11212"}
	}
	const serverCert = "ssl_chain_cert=/run/memcached/tls/tls.crt,ssl_key=/run/memcached/tls/tls.key"
	tests := []struct {
		name string
		spec string
		want []string // after defaultArgs
	}{
		{"neither", `{}`, nil},
		{"TLS, defaults", `{"tls":{"secretName":"cache-tls"}}`, tlsArgs(serverCert + ",ssl_min_version=2")},
		{"TLS 1.3", `{"tls":{"secretName":"cache-tls","minVersion":"1.3"}}`, tlsArgs(serverCert + ",ssl_min_version=3")},
		{
			"client certificates required", `{"tls":{"secretName":"cache-tls","clientCertificates":"Required"}}`,
			tlsArgs(serverCert + ",ssl_min_version=2,ssl_ca_cert=/run/memcached/tls/ca.crt,ssl_verify_mode=2"),
		},
		{"client certificates None: no CA, no verification", `{"tls":{"secretName":"cache-tls","clientCertificates":"None"}}`, tlsArgs(serverCert + ",ssl_min_version=2")},
		{"SASL by default", `{"auth":{"secretName":"cache-users"}}`, []string{"-S"}},
		{"SASL", `{"auth":{"secretName":"cache-users","mode":"SASL"}}`, []string{"-S"}},
		{"ASCII", `{"auth":{"secretName":"cache-users","mode":"ASCII"}}`, []string{"-Y", "/run/memcached/auth/users"}},
		{
			"TLS and ASCII, before extraArgs", `{"tls":{"secretName":"cache-tls"},"auth":{"secretName":"cache-users","mode":"ASCII"},"memcached":{"extraArgs":["-R","40"]}}`,
			append(tlsArgs(serverCert+",ssl_min_version=2"), "-Y", "/run/memcached/auth/users", "-R", "40"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: tt.spec}.run(t, fixedNow)
			wantArgs(t, a, append(slices.Clone(defaultArgs), tt.want...))
		})
	}
}

// podShape is the part of the Pod template TLS and authentication change,
// flattened for comparison.
type podShape struct {
	InitContainers []string          // names
	Containers     []string          // names
	Volumes        map[string]string // name -> what it is
	Mounts         map[string]string // container/volume -> path and mode
	Env            []string          // the memcached container's, NAME=value
	ShareProcesses bool
	FSGroup        int64
	LivenessPort   string // in the liveness check's command
	ExporterAddr   string // the exporter's --memcached.address, "" without one
}

func shapeOf(t *testing.T, a syncAnswer) podShape {
	t.Helper()
	spec := a.deployment(t).Spec.Template.Spec
	s := podShape{Volumes: map[string]string{}, Mounts: map[string]string{}}
	mounts := func(c corev1.Container) {
		for _, m := range c.VolumeMounts {
			mode := "rw"
			if m.ReadOnly {
				mode = "ro"
			}
			s.Mounts[c.Name+"/"+m.Name] = m.MountPath + " " + mode
		}
	}
	for _, c := range spec.InitContainers {
		s.InitContainers = append(s.InitContainers, c.Name)
		mounts(c)
	}
	for _, c := range spec.Containers {
		s.Containers = append(s.Containers, c.Name)
		mounts(c)
		switch c.Name {
		case "memcached":
			for _, e := range c.Env {
				s.Env = append(s.Env, e.Name+"="+e.Value)
			}
			cmd := strings.Join(c.LivenessProbe.Exec.Command, " ")
			for _, port := range []string{"11211", "11212"} {
				if strings.Contains(cmd, port) {
					s.LivenessPort = port
				}
			}
		case "exporter":
			for _, arg := range c.Args {
				if v, ok := strings.CutPrefix(arg, "--memcached.address="); ok {
					s.ExporterAddr = v
				}
			}
		}
	}
	for _, v := range spec.Volumes {
		switch {
		case v.Secret != nil:
			s.Volumes[v.Name] = fmt.Sprintf("Secret %s optional=%v mode=%o", v.Secret.SecretName, *v.Secret.Optional, *v.Secret.DefaultMode)
		case v.EmptyDir != nil:
			s.Volumes[v.Name] = fmt.Sprintf("emptyDir %s %s", v.EmptyDir.Medium, v.EmptyDir.SizeLimit)
		default:
			s.Volumes[v.Name] = "other"
		}
	}
	s.ShareProcesses = spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace
	if sc := spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		s.FSGroup = *sc.FSGroup
	}
	return s
}

// TestSecurityPod checks the Pod template for each mode: the Secrets as
// optional volumes readable by the Pod's group only, mounted read-only
// under /run/memcached; the check init container and the reload sidecar;
// one process namespace only where the sidecar signals memcached (TLS,
// ASCII), not for SASL, whose password file memcached reads at each login;
// and the Pod's own checks on the loopback plain-text port under TLS.
func TestSecurityPod(t *testing.T) {
	tlsVolume := "Secret cache-tls optional=true mode=440"
	usersVolume := "Secret cache-users optional=true mode=440"
	tests := []struct {
		name string
		spec string
		want podShape
	}{
		{"neither", `{"metrics":{"enabled":true}}`, podShape{
			Containers: []string{"memcached", "exporter"},
			Volumes:    map[string]string{}, Mounts: map[string]string{},
			LivenessPort: "11211", ExporterAddr: "localhost:11211",
		}},
		{"TLS with metrics", `{"tls":{"secretName":"cache-tls"},"metrics":{"enabled":true}}`, podShape{
			InitContainers: []string{"check"},
			Containers:     []string{"memcached", "exporter", "reload"},
			Volumes:        map[string]string{"tls": tlsVolume},
			Mounts: map[string]string{
				"check/tls": "/run/memcached/tls ro", "memcached/tls": "/run/memcached/tls ro", "reload/tls": "/run/memcached/tls ro",
			},
			ShareProcesses: true, FSGroup: 11211,
			LivenessPort: "11212", ExporterAddr: "localhost:11212",
		}},
		{"SASL", `{"auth":{"secretName":"cache-users"}}`, podShape{
			InitContainers: []string{"check"},
			Containers:     []string{"memcached", "reload"},
			Volumes:        map[string]string{"auth": usersVolume, "sasl": "emptyDir Memory 1Mi"},
			Mounts: map[string]string{
				"check/auth": "/run/memcached/auth ro", "check/sasl": "/run/memcached/sasl rw",
				"memcached/auth": "/run/memcached/auth ro", "memcached/sasl": "/run/memcached/sasl ro",
				"reload/auth": "/run/memcached/auth ro", "reload/sasl": "/run/memcached/sasl rw",
			},
			Env:          []string{"MEMCACHED_SASL_PWDB=/run/memcached/sasl/pwdb", "SASL_CONF_PATH=/run/memcached/sasl"},
			FSGroup:      11211,
			LivenessPort: "11211",
		}},
		{"ASCII", `{"auth":{"secretName":"cache-users","mode":"ASCII"}}`, podShape{
			InitContainers: []string{"check"},
			Containers:     []string{"memcached", "reload"},
			Volumes:        map[string]string{"auth": usersVolume},
			Mounts: map[string]string{
				"check/auth": "/run/memcached/auth ro", "memcached/auth": "/run/memcached/auth ro", "reload/auth": "/run/memcached/auth ro",
			},
			ShareProcesses: true, FSGroup: 11211,
			LivenessPort: "11211",
		}},
		{"TLS and SASL", `{"tls":{"secretName":"cache-tls"},"auth":{"secretName":"cache-users"}}`, podShape{
			InitContainers: []string{"check"},
			Containers:     []string{"memcached", "reload"},
			Volumes:        map[string]string{"tls": tlsVolume, "auth": usersVolume, "sasl": "emptyDir Memory 1Mi"},
			Mounts: map[string]string{
				"check/tls": "/run/memcached/tls ro", "check/auth": "/run/memcached/auth ro", "check/sasl": "/run/memcached/sasl rw",
				"memcached/tls": "/run/memcached/tls ro", "memcached/auth": "/run/memcached/auth ro", "memcached/sasl": "/run/memcached/sasl ro",
				"reload/tls": "/run/memcached/tls ro", "reload/auth": "/run/memcached/auth ro", "reload/sasl": "/run/memcached/sasl rw",
			},
			Env:            []string{"MEMCACHED_SASL_PWDB=/run/memcached/sasl/pwdb", "SASL_CONF_PATH=/run/memcached/sasl"},
			ShareProcesses: true, FSGroup: 11211,
			LivenessPort: "11212",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shapeOf(t, fixture{spec: tt.spec}.run(t, fixedNow))
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("Pod template (-got +want):\n%s", diff)
			}
		})
	}
}

// TestTLSMemory checks the default memory over TLS: 64 KiB a connection
// instead of 24, the rest as without (README, "Memory").
func TestTLSMemory(t *testing.T) {
	for _, tt := range []struct {
		spec string
		want string
	}{
		{`{"tls":{"secretName":"c"}}`, "148Mi"},
		// 1024 + 175 (hash table) + 256 (4096 connections) + 2 + 8.
		{`{"tls":{"secretName":"c"},"memcached":{"maxMemoryMB":1024,"maxConnections":4096,"threads":8}}`, "1465Mi"},
	} {
		r := fixture{spec: tt.spec}.run(t, fixedNow).container(t, "memcached").Resources
		if got := r.Limits.Memory().String(); got != tt.want {
			t.Errorf("%s: memory limit %s, want %s", tt.spec, got, tt.want)
		}
	}
}

// TestSecurityScriptsUseTheImage checks that the check and reload
// containers run the memcached image's shell, with the restricted security
// context and bounded resources, and that their scripts name the Secret
// they check but no key's content (the hook never sees one).
func TestSecurityScriptsUseTheImage(t *testing.T) {
	a := fixture{spec: `{"image":"example.com/memcached:1.6.45","tls":{"secretName":"cache-tls","clientCertificates":"Required"},"auth":{"secretName":"cache-users","mode":"ASCII"}}`}.run(t, fixedNow)
	spec := a.deployment(t).Spec.Template.Spec
	scripts := append(slices.Clone(spec.InitContainers), spec.Containers...)
	for _, c := range scripts {
		if c.Name != "check" && c.Name != "reload" {
			continue
		}
		if c.Image != "example.com/memcached:1.6.45" {
			t.Errorf("%s image = %q, want the spec's", c.Name, c.Image)
		}
		if len(c.Command) != 3 || c.Command[0] != "sh" || c.Command[1] != "-c" {
			t.Fatalf("%s command = %q, want sh -c SCRIPT", c.Name, c.Command)
		}
		for _, want := range []string{`Secret "cache-tls" has no ca.crt`, `Secret "cache-users" has no users`, "at most 8 users"} {
			if !strings.Contains(c.Command[2], want) {
				t.Errorf("%s script lacks %q", c.Name, want)
			}
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s security context = %+v, want the restricted one", c.Name, sc)
		}
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			t.Errorf("%s has no memory limit", c.Name)
		}
		if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
			t.Errorf("%s termination message policy = %q, want FallbackToLogsOnError (the status repeats it)", c.Name, c.TerminationMessagePolicy)
		}
	}
	reload := a.container(t, "reload")
	if !strings.Contains(reload.Command[2], "kill -HUP") {
		t.Errorf("reload script does not signal memcached:\n%s", reload.Command[2])
	}
}

// TestNetworkPolicy checks the NetworkPolicy child: it selects exactly the
// Memcached's Pods (the Deployment's selector), lets the Memcached's own
// namespace reach memcached's port, and the exporter's when it runs, plus
// the spec's peers, or everyone when allowAll; nothing else.
func TestNetworkPolicy(t *testing.T) {
	own := `{"podSelector":{}}`
	monitoring := `{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}`
	block := `{"ipBlock":{"cidr":"10.20.0.0/16","except":["10.20.1.0/24"]}}`
	rule := func(port int, from ...string) string {
		r := fmt.Sprintf(`{"ports":[{"protocol":"TCP","port":%d}]`, port)
		if len(from) > 0 {
			r += `,"from":[` + strings.Join(from, ",") + `]`
		}
		return r + "}"
	}
	tests := []struct {
		name string
		spec string
		want []string // the ingress rules
	}{
		{"default: the namespace only", `{}`, []string{rule(11211, own)}},
		{"metrics: the namespace only", `{"metrics":{"enabled":true}}`, []string{rule(11211, own), rule(9150, own)}},
		{
			"more peers", `{"networkPolicy":{"memcached":{"from":[` + block + `]}}}`,
			[]string{rule(11211, own, block)},
		},
		{
			"metrics peers", `{"metrics":{"enabled":true},"networkPolicy":{"metrics":{"from":[` + monitoring + `]}}}`,
			[]string{rule(11211, own), rule(9150, own, monitoring)},
		},
		{
			"metrics peers without metrics: no metrics rule", `{"networkPolicy":{"metrics":{"from":[` + monitoring + `]}}}`,
			[]string{rule(11211, own)},
		},
		{"allowAll", `{"networkPolicy":{"memcached":{"allowAll":true}}}`, []string{rule(11211)}},
		{
			"allowAll for memcached, the namespace for metrics", `{"metrics":{"enabled":true},"networkPolicy":{"memcached":{"allowAll":true}}}`,
			[]string{rule(11211), rule(9150, own)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: tt.spec}.run(t, fixedNow)
			var np networkingv1.NetworkPolicy
			a.typedChild(t, memcached.NetworkPolicyKey, &np)
			if np.APIVersion != "networking.k8s.io/v1" || np.Kind != "NetworkPolicy" || np.Name != testName || np.Namespace != testNamespace {
				t.Errorf("NetworkPolicy is %s %s %s/%s, want networking.k8s.io/v1 NetworkPolicy %s/%s", np.APIVersion, np.Kind, np.Namespace, np.Name, testNamespace, testName)
			}
			d := a.deployment(t)
			if diff := cmp.Diff(np.Spec.PodSelector.MatchLabels, d.Spec.Selector.MatchLabels); diff != "" || len(np.Spec.PodSelector.MatchExpressions) > 0 {
				t.Errorf("podSelector is not the Deployment's selector (-got +want):\n%s", diff)
			}
			if diff := cmp.Diff(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}); diff != "" {
				t.Errorf("policyTypes (-got +want):\n%s", diff)
			}
			var want []networkingv1.NetworkPolicyIngressRule
			for _, w := range tt.want {
				var r networkingv1.NetworkPolicyIngressRule
				if err := json.Unmarshal([]byte(w), &r); err != nil {
					t.Fatalf("test rule %s: %v", w, err)
				}
				want = append(want, r)
			}
			if diff := cmp.Diff(np.Spec.Ingress, want); diff != "" {
				t.Errorf("ingress (-got +want):\n%s", diff)
			}
		})
	}
}

// TestNetworkPolicyNotManaged checks a CompositeController that does not
// manage NetworkPolicies yet: every other child as before, no
// NetworkPolicy, and Degraded naming the kind.
func TestNetworkPolicyNotManaged(t *testing.T) {
	a := fixture{spec: `{"size":3}`, kinds: []string{memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey}}.run(t, fixedNow)
	if diff := cmp.Diff(a.childKeys(), []string{memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey}); diff != "" {
		t.Errorf("children (-got +want):\n%s", diff)
	}
	d := a.condition(t, "Degraded")
	if d.Status != "True" || d.Reason != "ChildKindNotManaged" || !strings.Contains(d.Message, memcached.NetworkPolicyKey) {
		t.Errorf("Degraded = %s %s %q, want True ChildKindNotManaged naming %s", d.Status, d.Reason, d.Message, memcached.NetworkPolicyKey)
	}
}
