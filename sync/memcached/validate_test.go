package memcached_test

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/testutil"
)

// invalidSpecs are specs the hook must refuse, each with the field its
// message must name.
var invalidSpecs = []struct {
	name  string
	spec  string
	field string
}{
	{"negative size", `{"size":-1}`, "spec.size"},
	{"size 1001", `{"size":1001}`, "spec.size"},
	{"size as a string", `{"size":"3"}`, "spec.size"},
	{"size not whole", `{"size":2.5}`, "spec.size"},
	{"spec as a list", `[{"size":3}]`, "spec"},
	// The API server's rules: names are case-sensitive, and a field the
	// spec does not have is refused (strict field validation), not ignored.
	{"unknown field", `{"size":2,"sise":3}`, "spec.sise"},
	{"wrongly cased field", `{"SIZE":5}`, "spec.SIZE"},
	{"spec as a string", `"big"`, "spec"},
	{"memcached as a string", `{"memcached":"fast"}`, "spec.memcached"},
	{"image with a space", `{"image":"memcached 1.6"}`, "spec.image"},
	{"maxMemoryMB 1", `{"memcached":{"maxMemoryMB":1}}`, "spec.memcached.maxMemoryMB"},
	{"maxConnections 0", `{"memcached":{"maxConnections":0}}`, "spec.memcached.maxConnections"},
	{"threads 0", `{"memcached":{"threads":0}}`, "spec.memcached.threads"},
	{"threads 65", `{"memcached":{"threads":65}}`, "spec.memcached.threads"},
	{"threads as a string", `{"memcached":{"threads":"4"}}`, "spec.memcached.threads"},
	{"verbosity 3", `{"memcached":{"verbosity":3}}`, "spec.memcached.verbosity"},
	{"verbosity -1", `{"memcached":{"verbosity":-1}}`, "spec.memcached.verbosity"},
	{"maxItemSize over half of the default memory", `{"memcached":{"maxItemSize":"33Mi"}}`, "spec.memcached.maxItemSize"},
	{"maxItemSize over half of maxMemoryMB", `{"memcached":{"maxMemoryMB":128,"maxItemSize":"65Mi"}}`, "spec.memcached.maxItemSize"},
	{"maxItemSize 1m means milli", `{"memcached":{"maxItemSize":"1m"}}`, "spec.memcached.maxItemSize"},
	{"maxItemSize under 1Ki", `{"memcached":{"maxItemSize":"1000"}}`, "spec.memcached.maxItemSize"},
	{"maxItemSize over 1Gi", `{"memcached":{"maxMemoryMB":8192,"maxItemSize":"2Gi"}}`, "spec.memcached.maxItemSize"},
	{"maxItemSize not a quantity", `{"memcached":{"maxItemSize":"lots"}}`, "spec.memcached.maxItemSize"},
	{"extraArgs -m", `{"memcached":{"extraArgs":["-o","modern","-m"]}}`, "spec.memcached.extraArgs[2]"},
	{"extraArgs -m64", `{"memcached":{"extraArgs":["-o","modern","-m64"]}}`, "spec.memcached.extraArgs[2]"},
	{"extraArgs --memory-limit=10", `{"memcached":{"extraArgs":["-o","modern","--memory-limit=10"]}}`, "spec.memcached.extraArgs[2]"},
	{"extraArgs -vv", `{"memcached":{"extraArgs":["-o","modern","-vv"]}}`, "spec.memcached.extraArgs[2]"},
	{"extraArgs -p", `{"memcached":{"extraArgs":["-o","modern","-p"]}}`, "spec.memcached.extraArgs[2]"},
	{"extraArgs -c", `{"memcached":{"extraArgs":["-c","10"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs -t", `{"memcached":{"extraArgs":["-t","10"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs -I", `{"memcached":{"extraArgs":["-I","2m"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs -U", `{"memcached":{"extraArgs":["-U","11211"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs -l", `{"memcached":{"extraArgs":["-l","127.0.0.1"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs -d in a group", `{"memcached":{"extraArgs":["-Ad"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs -u", `{"memcached":{"extraArgs":["-u","root"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs --port", `{"memcached":{"extraArgs":["--port","1"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs --threads=", `{"memcached":{"extraArgs":["--threads=64"]}}`, "spec.memcached.extraArgs[0]"},
	// memcached parses its options with getopt_long, which takes any
	// unambiguous prefix of a long option: these set -t and -I.
	{"extraArgs abbreviated --thr=", `{"memcached":{"extraArgs":["--thr=64"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs abbreviated --max-item=", `{"memcached":{"extraArgs":["--max-item=512m"]}}`, "spec.memcached.extraArgs[0]"},
	{"pod label app.kubernetes.io/name", `{"podLabels":{"app.kubernetes.io/name":"other"}}`, "spec.podLabels"},
	{"pod label app.kubernetes.io/instance", `{"podLabels":{"app.kubernetes.io/instance":"other"}}`, "spec.podLabels"},
	{"pod label app.kubernetes.io/managed-by", `{"podLabels":{"app.kubernetes.io/managed-by":"me"}}`, "spec.podLabels"},
	// The least memory limit: 64 + 11 + 24 + 1 + 8 = 108Mi for the
	// defaults (README, "Memory").
	{"memory limit under what memcached can use", `{"resources":{"limits":{"memory":"107Mi"}}}`, "spec.resources.limits[memory]"},
	{"memory limit under a larger maxMemoryMB's need", `{"memcached":{"maxMemoryMB":1024},"resources":{"limits":{"memory":"1Gi"}}}`, "spec.resources.limits[memory]"},
	// Over TLS a connection costs 64 KiB: 64 + 11 + 64 + 1 + 8.
	{"memory limit under what memcached can use over TLS", `{"tls":{"secretName":"c"},"resources":{"limits":{"memory":"147Mi"}}}`, "spec.resources.limits[memory]"},
	{"memory limit under many connections' need", `{"memcached":{"maxConnections":19000},"resources":{"limits":{"memory":"205Mi"}}}`, "spec.resources.limits[memory]"},
	// memcached takes 5 descriptors per thread before any client: these
	// exit at start or serve almost nobody.
	{"16 connections for 4 threads", `{"memcached":{"maxConnections":16}}`, "spec.memcached.maxConnections"},
	{"100 connections for 64 threads", `{"memcached":{"maxConnections":100,"threads":64}}`, "spec.memcached.maxConnections"},
	{"39 connections for 4 threads", `{"memcached":{"maxConnections":39}}`, "spec.memcached.maxConnections"},
	// extraArgs as memcached reads them.
	{"extraArgs trailing -o", `{"memcached":{"extraArgs":["-o","modern","-o"]}}`, "spec.memcached.extraArgs[2]"},
	{"extraArgs trailing --extended", `{"memcached":{"extraArgs":["--extended"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs bare word", `{"memcached":{"extraArgs":["modern"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs --", `{"memcached":{"extraArgs":["-M","--","-R","5"]}}`, "spec.memcached.extraArgs[1]"},
	{"extraArgs unknown option", `{"memcached":{"extraArgs":["-q"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs unknown long option", `{"memcached":{"extraArgs":["--foo"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs ambiguous long option", `{"memcached":{"extraArgs":["--enable-s"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs value on a flag", `{"memcached":{"extraArgs":["--disable-cas=yes"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs unknown -o suboption", `{"memcached":{"extraArgs":["-o","foo=bar"]}}`, "spec.memcached.extraArgs[1]"},
	{"extraArgs -o suboption after a space", `{"memcached":{"extraArgs":["-o","idle_timeout=30, modern"]}}`, "spec.memcached.extraArgs[1]"},
	{"extraArgs -o slab_sizes without a value", `{"memcached":{"extraArgs":["-o","slab_sizes"]}}`, "spec.memcached.extraArgs[1]"},
	{"extraArgs -o hashpower without a value", `{"memcached":{"extraArgs":["-ohashpower"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs -o ssl option", `{"memcached":{"extraArgs":["-o","ssl_verify_mode=2"]}}`, "spec.memcached.extraArgs[1]"},
	{"extraArgs -B binary with metrics", `{"metrics":{"enabled":true},"memcached":{"extraArgs":["-B","binary"]}}`, "spec.memcached.extraArgs[1]"},
	{"extraArgs -B junk", `{"memcached":{"extraArgs":["-B","json"]}}`, "spec.memcached.extraArgs[1]"},
	{"extraArgs -Z", `{"memcached":{"extraArgs":["-Z"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs -e", `{"memcached":{"extraArgs":["-e","/tmp/mem"]}}`, "spec.memcached.extraArgs[0]"},
	{"memory limit not a quantity", `{"resources":{"limits":{"memory":"lots"}}}`, "spec.resources.limits[memory]"},
	{"memory request over the limit", `{"resources":{"requests":{"memory":"200Mi"},"limits":{"memory":"128Mi"}}}`, "spec.resources.requests[memory]"},
	{"serviceMonitor without metrics", `{"metrics":{"serviceMonitor":{"enabled":true}}}`, "spec.metrics.serviceMonitor.enabled"},
	{"serviceMonitor with metrics disabled", `{"metrics":{"enabled":false,"serviceMonitor":{"enabled":true}}}`, "spec.metrics.serviceMonitor.enabled"},
	// memcached exits unless -I is a multiple of its 512 KiB slab chunk.
	{"maxItemSize under 512Ki", `{"memcached":{"maxItemSize":"100Ki"}}`, "spec.memcached.maxItemSize"},
	{"maxItemSize not a multiple of 512Ki", `{"memcached":{"maxItemSize":"1000Ki"}}`, "spec.memcached.maxItemSize"},
	{"maxConnections above the open-files bound", `{"memcached":{"maxConnections":65537}}`, "spec.memcached.maxConnections"},
	// The agent that hands items on has no certificate or password, and
	// needs the text protocol and mgdump.
	{"keepWarm with tls", `{"rollout":{"keepWarm":true},"tls":{"secretName":"t"}}`, "spec.rollout.keepWarm"},
	{"keepWarm with auth", `{"rollout":{"keepWarm":true},"auth":{"secretName":"u"}}`, "spec.rollout.keepWarm"},
	{"keepWarm with -X", `{"rollout":{"keepWarm":true},"memcached":{"extraArgs":["-X"]}}`, "spec.memcached.extraArgs[0]"},
	{"keepWarm with no_lru_crawler", `{"rollout":{"keepWarm":true},"memcached":{"extraArgs":["-o","no_lru_crawler"]}}`, "spec.memcached.extraArgs[1]"},
	{"keepWarm with -B binary", `{"rollout":{"keepWarm":true},"memcached":{"extraArgs":["-B","binary"]}}`, "spec.memcached.extraArgs[1]"},
	// memcached's proxy has no TLS or SASL to the Pods.
	{"proxy with tls", `{"proxy":{"enabled":true},"tls":{"secretName":"t"}}`, "spec.proxy.enabled"},
	{"proxy with auth", `{"proxy":{"enabled":true},"auth":{"secretName":"u"}}`, "spec.proxy.enabled"},
	{"proxy replicas 0", `{"proxy":{"enabled":true,"replicas":0}}`, "spec.proxy.replicas"},
	{"proxy threads 65", `{"proxy":{"enabled":true,"threads":65}}`, "spec.proxy.threads"},
	{"proxy readTimeout 1ms", `{"proxy":{"enabled":true,"readTimeout":"1ms"}}`, "spec.proxy.readTimeout"},
	{"proxy retryAfter 1h", `{"proxy":{"enabled":true,"retryAfter":"1h"}}`, "spec.proxy.retryAfter"},
	{"proxy connectTimeout not a duration", `{"proxy":{"enabled":true,"connectTimeout":"soon"}}`, "spec.proxy.connectTimeout"},
	{"handoffSeconds 5", `{"rollout":{"keepWarm":true,"handoffSeconds":5}}`, "spec.rollout.handoffSeconds"},
	{"handoffSeconds 7201", `{"rollout":{"keepWarm":true,"handoffSeconds":7201}}`, "spec.rollout.handoffSeconds"},
	// Metacontroller fails the whole sync for a child whose controller-uid
	// is not the parent's.
	{"pod label controller-uid", `{"podLabels":{"controller-uid":"x"}}`, "spec.podLabels"},
	{"serviceMonitor label controller-uid", `{"metrics":{"enabled":true,"serviceMonitor":{"enabled":true,"labels":{"controller-uid":"x"}}}}`, "spec.metrics.serviceMonitor.labels"},
	// The API server would refuse the Deployment for these.
	{"cpu request over the limit", `{"resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}}`, "spec.resources.requests[cpu]"},
	{"exporter memory request over its limit", `{"metrics":{"enabled":true,"resources":{"requests":{"memory":"1Gi"},"limits":{"memory":"64Mi"}}}}`, "spec.metrics.resources.requests[memory]"},
	{"unknown resource name", `{"resources":{"limits":{"foo":"1"}}}`, "spec.resources.limits[foo]"},
	{"toleration Exists with a value", `{"tolerations":[{"key":"k","operator":"Exists","value":"x"}]}`, "spec.tolerations[0].value"},
	{"toleration with a bad effect", `{"tolerations":[{"key":"k","operator":"Equal","value":"x","effect":"Sometimes"}]}`, "spec.tolerations[0].effect"},
	{"spread maxSkew 0", `{"topologySpreadConstraints":[{"maxSkew":0,"topologyKey":"zone","whenUnsatisfiable":"ScheduleAnyway"}]}`, "spec.topologySpreadConstraints[0].maxSkew"},
	{"spread without a topology key", `{"topologySpreadConstraints":[{"maxSkew":1,"whenUnsatisfiable":"ScheduleAnyway"}]}`, "spec.topologySpreadConstraints[0].topologyKey"},
	// TLS, authentication, who may connect.
	{"tls without secretName", `{"tls":{}}`, "spec.tls.secretName"},
	{"tls secretName not a name", `{"tls":{"secretName":"Cache_TLS"}}`, "spec.tls.secretName"},
	{"tls clientCertificates unknown", `{"tls":{"secretName":"c","clientCertificates":"Optional"}}`, "spec.tls.clientCertificates"},
	{"tls minVersion 1.1", `{"tls":{"secretName":"c","minVersion":"1.1"}}`, "spec.tls.minVersion"},
	{"tls minVersion as a number", `{"tls":{"secretName":"c","minVersion":1.3}}`, "spec.tls.minVersion"},
	{"tls unknown field", `{"tls":{"secretName":"c","caSecretName":"d"}}`, "spec.tls.caSecretName"},
	{"auth secretName not a name", `{"auth":{"secretName":"users/admin"}}`, "spec.auth.secretName"},
	{"auth mode unknown", `{"auth":{"secretName":"u","mode":"PLAIN"}}`, "spec.auth.mode"},
	{"auth with metrics", `{"auth":{"secretName":"u"},"metrics":{"enabled":true}}`, "spec.metrics.enabled"},
	{"extraArgs -B ascii with SASL", `{"auth":{"secretName":"u"},"memcached":{"extraArgs":["-B","ascii"]}}`, "spec.memcached.extraArgs[1]"},
	{"extraArgs -B auto with SASL", `{"auth":{"secretName":"u"},"memcached":{"extraArgs":["-Bauto"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs -B binary with ASCII auth", `{"auth":{"secretName":"u","mode":"ASCII"},"memcached":{"extraArgs":["-B","binary"]}}`, "spec.memcached.extraArgs[1]"},
	{"extraArgs -S", `{"memcached":{"extraArgs":["-S"]}}`, "spec.memcached.extraArgs[0]"},
	{"extraArgs -Y", `{"memcached":{"extraArgs":["-Y","/tmp/users"]}}`, "spec.memcached.extraArgs[0]"},
	{"networkPolicy allowAll and from", `{"networkPolicy":{"memcached":{"allowAll":true,"from":[{"podSelector":{}}]}}}`, "spec.networkPolicy.memcached.allowAll"},
	{"networkPolicy metrics allowAll and from", `{"networkPolicy":{"metrics":{"allowAll":true,"from":[{"podSelector":{}}]}}}`, "spec.networkPolicy.metrics.allowAll"},
	{"networkPolicy empty peer", `{"networkPolicy":{"memcached":{"from":[{}]}}}`, "spec.networkPolicy.memcached.from[0]"},
	{"networkPolicy ipBlock not a CIDR", `{"networkPolicy":{"memcached":{"from":[{"ipBlock":{"cidr":"10.0.0.1"}}]}}}`, "spec.networkPolicy.memcached.from[0].ipBlock.cidr"},
	{"networkPolicy except outside the block", `{"networkPolicy":{"memcached":{"from":[{"ipBlock":{"cidr":"10.0.0.0/16","except":["10.1.0.0/24"]}}]}}}`, "spec.networkPolicy.memcached.from[0].ipBlock.except[0]"},
	{"networkPolicy except the whole block", `{"networkPolicy":{"memcached":{"from":[{"ipBlock":{"cidr":"10.0.0.0/16","except":["10.0.0.0/16"]}}]}}}`, "spec.networkPolicy.memcached.from[0].ipBlock.except[0]"},
	{"networkPolicy except wider than the block", `{"networkPolicy":{"metrics":{"from":[{"ipBlock":{"cidr":"10.0.0.0/16","except":["10.0.1.0/24","10.0.0.0/8"]}}]}}}`, "spec.networkPolicy.metrics.from[0].ipBlock.except[1]"},
	{"networkPolicy ipBlock with a podSelector", `{"networkPolicy":{"memcached":{"from":[{"ipBlock":{"cidr":"10.0.0.0/16"},"podSelector":{}}]}}}`, "spec.networkPolicy.memcached.from[0].ipBlock"},
	{"networkPolicy bad selector", `{"networkPolicy":{"metrics":{"from":[{"namespaceSelector":{"matchExpressions":[{"key":"a","operator":"Near"}]}}]}}}`, "spec.networkPolicy.metrics.from[0].namespaceSelector"},
	{"spread with a bad whenUnsatisfiable", `{"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"Nope"}]}`, "spec.topologySpreadConstraints[0].whenUnsatisfiable"},
	// spec.extstore: what memcached would not start with, and headers that
	// would not fit in RAM.
	{"extstore without a size", `{"extstore":{}}`, "spec.extstore.size"},
	{"extstore of 4 pages: 3 in the file", `{"extstore":{"size":"256Mi"}}`, "spec.extstore.size"},
	{"extstore size not a quantity", `{"extstore":{"size":"big"}}`, "spec.extstore.size"},
	{"extstore write buffer of 3 MB", `{"extstore":{"size":"1Gi","writeBufferMB":3}}`, "spec.extstore.writeBufferMB"},
	{"extstore write buffer of 128 MB", `{"memcached":{"maxMemoryMB":1024},"extstore":{"size":"1Gi","writeBufferMB":128}}`, "spec.extstore.writeBufferMB"},
	{"maxItemSize above the write buffer", `{"memcached":{"maxMemoryMB":1024,"maxItemSize":"16Mi"},"extstore":{"size":"1Gi"}}`, "spec.extstore.writeBufferMB"},
	{"maxItemSize above a 2 MB write buffer", `{"memcached":{"maxItemSize":"2560Ki"},"extstore":{"size":"1Gi","writeBufferMB":2}}`, "spec.extstore.writeBufferMB"},
	{"extstore threads 0", `{"extstore":{"size":"1Gi","threads":0}}`, "spec.extstore.threads"},
	{"extstore free percent 60", `{"extstore":{"size":"1Gi","slabAutomoveFreePercent":60}}`, "spec.extstore.slabAutomoveFreePercent"},
	{"extstore expected item size 0", `{"extstore":{"size":"1Gi","expectedItemSize":0}}`, "spec.extstore.expectedItemSize"},
	// 100 GiB of 512-byte items is 200 M headers, 29 GiB of RAM.
	{"extstore headers over half of maxMemoryMB", `{"memcached":{"maxMemoryMB":4096},"extstore":{"size":"100Gi"}}`, "spec.extstore.size"},
	{"extstore headers over half of maxMemoryMB at the expected size", `{"memcached":{"maxMemoryMB":64},"extstore":{"size":"10Gi","expectedItemSize":16384}}`, "spec.extstore.size"},
	{"extraArgs ext_path", `{"memcached":{"extraArgs":["-o","ext_path=/tmp/x:64m"]}}`, "spec.memcached.extraArgs[1]"},
	{"extraArgs ext_threads beside extstore", `{"extstore":{"size":"1Gi"},"memcached":{"extraArgs":["-o","modern,ext_threads=8"]}}`, "spec.memcached.extraArgs[1]"},
}

// TestInvalidSpec checks what an invalid spec gets: every observed child
// back exactly as last applied (so Metacontroller deletes and changes
// nothing), Degraded True InvalidSpec naming the field, and Progressing False
// InvalidSpec. It runs each spec against the children of the captures (made
// by another hook) and against the hook's own children of all three kinds.
func TestInvalidSpec(t *testing.T) {
	captured := testutil.CaptureBody(t, "v2/0040-sync.json", "sync")
	allKinds := withAllKinds(t, captured)
	own := nextRequest(t, allKinds, callHook(t, "sync", allKinds, fixedNow))
	// The captured children, made by another hook, are tried with a few
	// specs only: what is kept does not depend on what is wrong.
	few := []string{"negative size", "spec as a list", "threads 65"}
	bases := []struct {
		name  string
		body  []byte
		specs []string // the invalidSpecs to try, by name; nil means all
	}{
		{"own children", own, nil},
		{"captured children", captured, few},
		{"v1 captured children", testutil.CaptureBody(t, "v1/0031-sync.json", "sync"), few},
	}
	for _, base := range bases {
		for _, tt := range invalidSpecs {
			if base.specs != nil && !slices.Contains(base.specs, tt.name) {
				continue
			}
			t.Run(base.name+"/"+tt.name, func(t *testing.T) {
				body := withSpec(t, base.body, tt.spec)
				a := parseAnswer(t, callHook(t, "sync", body, fixedNow))

				got := a.children
				slices.SortFunc(got, func(x, y map[string]any) int {
					return cmp.Or(cmp.Compare(childKey(x), childKey(y)), cmp.Compare(testutil.GetString(x, "metadata", "name"), testutil.GetString(y, "metadata", "name")))
				})
				want := lastAppliedOf(t, body)
				if len(want) == 0 {
					t.Fatal("base request observes no child")
				}
				if diff := gocmp.Diff(testutil.DecodeAny(t, testutil.MustMarshal(t, got)), testutil.DecodeAny(t, testutil.MustMarshal(t, want))); diff != "" {
					t.Errorf("children are not the observed last-applied configurations (-got +want):\n%s", diff)
				}

				d := a.condition(t, "Degraded")
				if d.Status != "True" || d.Reason != "InvalidSpec" {
					t.Errorf("Degraded = %s %s, want True InvalidSpec", d.Status, d.Reason)
				}
				if !namesField(d.Message, tt.field) {
					t.Errorf("Degraded message %q does not name %s", d.Message, tt.field)
				}
				if p := a.condition(t, "Progressing"); p.Status != "False" || p.Reason != "InvalidSpec" {
					t.Errorf("Progressing = %s %s, want False InvalidSpec", p.Status, p.Reason)
				}
			})
		}
	}
}

// namesField reports whether a message names a field: the field's path
// followed by something other than more path (so "spec.size" is not named by
// "spec.sizeLimit", and "spec" is named by "spec: ..." only).
func namesField(msg, field string) bool {
	for i := 0; ; {
		j := strings.Index(msg[i:], field)
		if j < 0 {
			return false
		}
		end := i + j + len(field)
		if end == len(msg) || !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.[", rune(msg[end])) {
			return true
		}
		i = end
	}
}

// TestInvalidSpecWithoutChildren checks that an invalid spec with nothing
// observed answers no children, not null.
func TestInvalidSpecWithoutChildren(t *testing.T) {
	body := withSpec(t, withAllKinds(t, testutil.CaptureBody(t, "v2/0002-sync.json", "sync")), `{"size":-1}`)
	raw := callHook(t, "sync", body, fixedNow)
	checkAnswer(t, "sync", body, raw)
	if a := parseAnswer(t, raw); len(a.children) != 0 {
		t.Errorf("got children %v, want none", a.childKeys())
	}
}

// TestInvalidSpecChildWithoutLastApplied checks that an observed child with
// no last-applied record (made by someone else) is answered as observed, less
// its status and the metadata the API server sets, so that nothing changes.
func TestInvalidSpecChildWithoutLastApplied(t *testing.T) {
	body := testutil.DecodeObject(t, withSpec(t, testutil.CaptureBody(t, "v2/0040-sync.json", "sync"), `{"size":-1}`))
	d := testutil.GetObject(body, "children", memcached.DeploymentKey, "cache/cache-a")
	delete(testutil.GetObject(d, "metadata", "annotations"), lastApplied)
	raw := testutil.MustMarshal(t, body)
	a := parseAnswer(t, callHook(t, "sync", raw, fixedNow))

	if len(a.children) != 1 {
		t.Fatalf("got children %v, want the Deployment", a.childKeys())
	}
	got := a.children[0]
	want := map[string]any{
		"apiVersion": d["apiVersion"],
		"kind":       d["kind"],
		"metadata": map[string]any{
			"name":        testutil.GetString(d, "metadata", "name"),
			"namespace":   testutil.GetString(d, "metadata", "namespace"),
			"labels":      testutil.GetObject(d, "metadata", "labels"),
			"annotations": testutil.GetObject(d, "metadata", "annotations"),
		},
		"spec": d["spec"],
	}
	if diff := gocmp.Diff(testutil.DecodeAny(t, testutil.MustMarshal(t, got)), testutil.DecodeAny(t, testutil.MustMarshal(t, want))); diff != "" {
		t.Errorf("kept child (-got +want):\n%s", diff)
	}
}

// TestValidSpecEdges checks specs at the edges of what is valid: they give
// the desired children, not InvalidSpec.
func TestValidSpecEdges(t *testing.T) {
	managedArgs := []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1m"}
	tests := []struct {
		name  string
		spec  string
		check func(t *testing.T, a syncAnswer)
	}{
		{"size 0: no Pod, no PDB", `{"size":0}`, func(t *testing.T, a syncAnswer) {
			wantReplicas(t, a, 0)
			wantKinds(t, a, memcached.DeploymentKey, memcached.ServiceKey, memcached.NetworkPolicyKey)
		}},
		{"size 1: no PDB", `{"size":1}`, func(t *testing.T, a syncAnswer) {
			wantReplicas(t, a, 1)
			wantKinds(t, a, memcached.DeploymentKey, memcached.ServiceKey, memcached.NetworkPolicyKey)
		}},
		{"size unset is 1", `{}`, func(t *testing.T, a syncAnswer) {
			wantReplicas(t, a, 1)
			wantKinds(t, a, memcached.DeploymentKey, memcached.ServiceKey, memcached.NetworkPolicyKey)
		}},
		{"spec null is the defaults", `null`, func(t *testing.T, a syncAnswer) {
			wantReplicas(t, a, 1)
			wantArgs(t, a, managedArgs)
		}},
		{"size 2: PDB maxUnavailable 1", `{"size":2}`, func(t *testing.T, a syncAnswer) {
			wantReplicas(t, a, 2)
			wantKinds(t, a, memcached.DeploymentKey, memcached.ServiceKey, memcached.PDBKey, memcached.NetworkPolicyKey)
			p := a.pdb(t)
			if p.Spec.MaxUnavailable == nil || *p.Spec.MaxUnavailable != intstr.FromInt32(1) || p.Spec.MinAvailable != nil {
				t.Errorf("PDB maxUnavailable/minAvailable = %v/%v, want 1/unset", p.Spec.MaxUnavailable, p.Spec.MinAvailable)
			}
			if diff := gocmp.Diff(p.Spec.Selector.MatchLabels, memcached.SelectorLabels(testName)); diff != "" {
				t.Errorf("PDB selector (-got +want):\n%s", diff)
			}
		}},
		{"size 1000", `{"size":1000}`, func(t *testing.T, a syncAnswer) { wantReplicas(t, a, 1000) }},
		{"-o idle_timeout=600 after the managed flags", `{"memcached":{"extraArgs":["-o","idle_timeout=600"]}}`, func(t *testing.T, a syncAnswer) {
			wantArgs(t, a, append(slices.Clone(managedArgs), "-o", "idle_timeout=600"))
		}},
		{"flags memcached has that the operator does not manage", `{"memcached":{"extraArgs":["-M","-R","40","--enable-largepages","-o","modern"]}}`, func(t *testing.T, a syncAnswer) {
			wantArgs(t, a, append(slices.Clone(managedArgs), "-M", "-R", "40", "--enable-largepages", "-o", "modern"))
		}},
		{"threads 1", `{"memcached":{"threads":1}}`, nil},
		{"threads 64", `{"memcached":{"threads":64}}`, nil},
		{"verbosity 2", `{"memcached":{"verbosity":2}}`, nil},
		{"maxMemoryMB 2", `{"memcached":{"maxMemoryMB":2,"maxItemSize":"1Mi"}}`, nil},
		{"40 connections for 4 threads", `{"memcached":{"maxConnections":40}}`, nil},
		{"340 connections for 64 threads", `{"memcached":{"maxConnections":340,"threads":64}}`, nil},
		{"-B binary without metrics", `{"memcached":{"extraArgs":["-B","binary"]}}`, nil},
		{"-o with several suboptions", `{"memcached":{"extraArgs":["-o","modern,idle_timeout=600,slab_automove"]}}`, nil},
		{"a short option group with a value", `{"memcached":{"extraArgs":["-MR40"]}}`, nil},
		{"a long option by an unambiguous prefix", `{"memcached":{"extraArgs":["--disable-ev"]}}`, nil},
		{"maxItemSize 512Ki", `{"memcached":{"maxItemSize":"512Ki"}}`, nil},
		{"maxItemSize exactly half of maxMemoryMB", `{"memcached":{"maxItemSize":"32Mi"}}`, func(t *testing.T, a syncAnswer) {
			wantArgs(t, a, []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "32m"})
		}},
		// 64 + 11 (hash table) + 24 (1,024 busy connections) + 1 (4
		// threads) + 8 MiB: the least the spec may ask for.
		{"memory limit exactly the least allowed", `{"resources":{"limits":{"memory":"108Mi"}}}`, func(t *testing.T, a syncAnswer) {
			r := a.container(t, "memcached").Resources
			if q := r.Limits.Memory(); q.Cmp(resource.MustParse("108Mi")) != 0 {
				t.Errorf("memory limit = %s, want 108Mi", q)
			}
		}},
		{"serviceMonitor disabled without metrics", `{"metrics":{"serviceMonitor":{"enabled":false}}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fixture{spec: tt.spec}.run(t, fixedNow)
			for _, typ := range []string{"Degraded", "Progressing"} {
				if c := a.condition(t, typ); c.Reason == "InvalidSpec" {
					t.Fatalf("%s = %s InvalidSpec: %s", typ, c.Status, c.Message)
				}
			}
			if tt.check != nil {
				tt.check(t, a)
			}
		})
	}
}

// wantReplicas checks the answer's Deployment replicas.
func wantReplicas(t *testing.T, a syncAnswer, want int32) {
	t.Helper()
	d := a.deployment(t)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
		t.Errorf("Deployment replicas = %v, want %d", d.Spec.Replicas, want)
	}
}

// wantKinds checks the kinds of the answer's children, in any order.
func wantKinds(t *testing.T, a syncAnswer, want ...string) {
	t.Helper()
	got := a.childKeys()
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if diff := gocmp.Diff(got, want); diff != "" {
		t.Errorf("children kinds (-got +want):\n%s", diff)
	}
}

// wantArgs checks the memcached container's argv.
func wantArgs(t *testing.T, a syncAnswer, want []string) {
	t.Helper()
	c := a.container(t, "memcached")
	if diff := gocmp.Diff(c.Args, want); diff != "" {
		t.Errorf("memcached args (-got +want):\n%s", diff)
	}
	if len(c.Command) != 0 {
		t.Errorf("memcached command = %v, want the image's entrypoint", c.Command)
	}
}

// TestInvalidName checks that a parent whose name cannot name a Service or
// be a label value (which an older CRD let through) makes no children, with
// Degraded InvalidSpec naming metadata.name: the API server would refuse
// every child, and Metacontroller's error would not reach the status.
func TestInvalidName(t *testing.T) {
	for _, tt := range []struct{ name, spec string }{
		{"my.cache", ""}, {"1cache", ""}, {strings.Repeat("c", 64), ""},
		// NAME-discovery and NAME-proxy name Services.
		{strings.Repeat("c", 54), `{"discovery":{"enabled":true}}`},
		{strings.Repeat("c", 58), `{"proxy":{"enabled":true}}`},
	} {
		name := tt.name
		t.Run(name, func(t *testing.T) {
			body := testutil.CaptureBody(t, "v2/0002-sync.json", "sync")
			if tt.spec != "" {
				body = withSpec(t, body, tt.spec)
			}
			req := testutil.DecodeObject(t, body)
			req["parent"].(map[string]any)["metadata"].(map[string]any)["name"] = name
			a := parseAnswer(t, callHook(t, "sync", testutil.MustMarshal(t, req), fixedNow))
			if len(a.children) != 0 {
				t.Errorf("answer has %d children, want none (none observed, and none could be made)", len(a.children))
			}
			d := a.condition(t, "Degraded")
			if d.Status != "True" || d.Reason != "InvalidSpec" || !strings.Contains(d.Message, "metadata.name") {
				t.Errorf("Degraded = %s %s %q, want True InvalidSpec naming metadata.name", d.Status, d.Reason, d.Message)
			}
		})
	}
}
