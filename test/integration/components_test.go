package integration

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/kube"
)

// TestSecurityOverlays checks that every overlay that turns on the hook's
// protections renders, sets the hook's flags and the CompositeController's
// matching webhook fields together, and is accepted by a real API server
// (with Metacontroller's CRDs, so the webhook fields are validated).
func TestSecurityOverlays(t *testing.T) {
	tests := []struct {
		overlay     string
		wantArgs    []string
		wantWebhook []string // fields set on both the customize and sync webhooks
		wantScheme  string   // of the probes
	}{
		{
			overlay:     "tls",
			wantArgs:    []string{"--tls-cert-file=/etc/memcached-hook/tls/tls.crt", "--tls-key-file=/etc/memcached-hook/tls/tls.key"},
			wantWebhook: []string{"caBundle"},
			wantScheme:  "HTTPS",
		},
		{
			overlay:     "secure",
			wantArgs:    []string{"--tls-cert-file=/etc/memcached-hook/tls/tls.crt", "--client-ca-file=/etc/memcached-hook/client-ca/ca.crt", "--auth-token-file=/etc/memcached-hook/auth-token/token"},
			wantWebhook: []string{"caBundle", "clientTLS", "authorization"},
			wantScheme:  "HTTPS",
		},
		{
			overlay:     "basic-auth",
			wantArgs:    []string{"--basic-auth-username-file=/etc/memcached-hook/basic-auth/username", "--basic-auth-password-file=/etc/memcached-hook/basic-auth/password"},
			wantWebhook: []string{"caBundle", "basicAuth"},
			wantScheme:  "HTTPS",
		},
	}

	c := kube.Start(t, kube.Options{})
	kubectl(t, c, nil, "apply", "--server-side", "-f", "testdata/metacontroller-crds-v1.yaml")
	kubectl(t, c, nil, "wait", "--for=condition=established", "--timeout=60s", "crd/compositecontrollers.metacontroller.k8s.io")
	// The base for real, so that the overlays' namespaced objects have
	// their namespace for the dry run.
	kubectl(t, c, nil, "apply", "-k", "../../manifests")

	for _, tt := range tests {
		t.Run(tt.overlay, func(t *testing.T) {
			dir := "../../manifests/overlays/" + tt.overlay
			rendered := kubectl(t, c, nil, "kustomize", dir)
			var args []string
			var scheme string
			webhooks := map[string]map[string]any{}
			for doc := range strings.SplitSeq(rendered, "\n---\n") {
				var obj struct {
					Kind string `json:"kind"`
					Spec struct {
						Template struct {
							Spec struct {
								Containers []struct {
									Args           []string `json:"args"`
									ReadinessProbe struct {
										HTTPGet struct {
											Scheme string `json:"scheme"`
										} `json:"httpGet"`
									} `json:"readinessProbe"`
								} `json:"containers"`
							} `json:"spec"`
						} `json:"template"`
						Hooks map[string]struct {
							Webhook map[string]any `json:"webhook"`
						} `json:"hooks"`
					} `json:"spec"`
				}
				if err := yaml.Unmarshal(bytes.TrimSpace([]byte(doc)), &obj); err != nil {
					t.Fatalf("rendered %s: %v", dir, err)
				}
				switch obj.Kind {
				case "Deployment":
					args = obj.Spec.Template.Spec.Containers[0].Args
					scheme = obj.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Scheme
				case "CompositeController":
					for name, h := range obj.Spec.Hooks {
						webhooks[name] = h.Webhook
					}
				}
			}
			for _, want := range tt.wantArgs {
				if !slices.Contains(args, want) {
					t.Errorf("hook args %q lack %q", args, want)
				}
			}
			if scheme != tt.wantScheme {
				t.Errorf("readiness probe scheme = %q, want %q", scheme, tt.wantScheme)
			}
			for _, hook := range []string{"customize", "sync"} {
				for _, field := range tt.wantWebhook {
					if _, ok := webhooks[hook][field]; !ok {
						t.Errorf("the %s webhook has no %s", hook, field)
					}
				}
				if svc, _ := webhooks[hook]["service"].(map[string]any); svc["protocol"] != "https" {
					t.Errorf("the %s webhook calls the hook over %v, want https", hook, svc["protocol"])
				}
			}
			kubectl(t, c, nil, "apply", "--dry-run=server", "-k", dir)
		})
	}
}
