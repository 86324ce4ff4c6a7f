package memcached

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/example/memcached-operator/sync/api/v1alpha1"
)

// TLS and authentication in the memcached Pods, and TLS on the agent's
// configuration endpoint.
//
// The Secrets are mounted read-only under /run (memory, never disk) and
// memcached reads them there; neither their contents nor anything derived
// from them is in memcached's arguments, its environment or anything the
// hook writes. Two small shell scripts (scripts/check.sh, scripts/reload.sh,
// sharing scripts/check-function.sh), run with the memcached image's
// busybox, do what memcached cannot:
//
//   - An init container (check) refuses to start memcached when a Secret
//     lacks a key or holds files memcached cannot load (memcached itself
//     tries them), and says which in its termination message, which the
//     status repeats: the rollout stalls on the new Pod while the old ones
//     keep serving their part of the cache. For SASL it also writes the
//     SASL configuration and the password file memcached reads.
//   - A sidecar (reload) watches the Secrets' volumes, which kubelet
//     updates in place (a new ..data directory, one symlink switched), runs
//     check's checks, and only then has the running memcached load them:
//     SIGHUP makes memcached reload its certificates and its ASCII
//     authentication file within a second, without a restart, so no item
//     is lost. The Pod shares one process
//     namespace for it. SIGHUP rather than memcached's refresh_certs
//     command, because under SASL every connection speaks the binary
//     protocol, which has no such command, and because the ASCII
//     authentication file is reloaded on SIGHUP only.
const (
	tlsDir  = "/run/memcached/tls"
	authDir = "/run/memcached/auth"
	saslDir = "/run/memcached/sasl"

	// LocalPort is memcached's plain-text listener on loopback, for the
	// Pod's own containers (the liveness check, the exporter) when
	// clients speak TLS on Port.
	LocalPort = 11212

	checkContainer  = "check"
	reloadContainer = "reload"
	// reloadSeconds is how often the reload sidecar looks at the Secrets.
	reloadSeconds = 5
)

// exporterUID is the user the exporter runs as when the Pod shares its
// process namespace: nobody, the exporter image's own user.
const exporterUID = 65534

type security struct{ noFeature }

func (security) args(s *v1alpha1.MemcachedSpec) []string { return securityArgs(s) }

// pod mounts the Secrets in memcached, checks them before it starts, and
// reloads them beside it.
func (security) pod(s *v1alpha1.MemcachedSpec, t *corev1.PodTemplateSpec) {
	if !secured(s) {
		return
	}
	mc := container(t, "memcached")
	// Added to what the features before it mounted (extstore's disk).
	mc.Env, mc.VolumeMounts = securityEnv(s), append(mc.VolumeMounts, mounts(s, false)...)
	t.Spec.InitContainers = []corev1.Container{scriptContainer(s, checkContainer, checkScript(s))}
	t.Spec.Containers = append(t.Spec.Containers, scriptContainer(s, reloadContainer, reloadScript(s)))
	t.Spec.Volumes = append(t.Spec.Volumes, securityVolumes(s)...)
	// The Secrets' files are readable by this group only.
	t.Spec.SecurityContext.FSGroup = ptr(int64(memcachedUID))
	if !reloadsBySignal(s) {
		return
	}
	// The reload sidecar signals memcached.
	t.Spec.ShareProcessNamespace = ptr(true)
	if c := container(t, "exporter"); c != nil {
		// The Pod shares one process namespace, where a process can read
		// another's files through /proc/PID/root when both run as one
		// user: as memcached's user, the exporter could read the TLS key
		// and the users file. As another user it cannot.
		withUser(c.SecurityContext, exporterUID)
	}
}

// agentPod has the agent's endpoint speak TLS with memcached's own
// certificate, and ask for client certificates when memcached does:
// clients that use TLS to memcached use it to the endpoint too. The Secret
// is mounted as a directory, never with subPath, so a renewed certificate
// reaches the agent, which reloads it.
func (security) agentPod(s *v1alpha1.MemcachedSpec, t *corev1.PodTemplateSpec) {
	if s.TLS == nil {
		return
	}
	const dir = "/run/memcached-agent/tls"
	t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: s.TLS.SecretName, DefaultMode: ptr(int32(0o440))},
	}})
	t.Spec.SecurityContext.FSGroup = ptr(int64(agentUID))
	c := container(t, "agent")
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: dir, ReadOnly: true})
	c.Args = append(c.Args, "--tls-cert-file="+dir+"/tls.crt", "--tls-key-file="+dir+"/tls.key")
	if s.TLS.ClientCertificates == v1alpha1.ClientCertificatesRequired {
		c.Args = append(c.Args, "--client-ca-file="+dir+"/ca.crt")
	}
	if s.TLS.MinVersion != "" {
		c.Args = append(c.Args, "--tls-min-version="+s.TLS.MinVersion)
	}
}

// localPort is the port the Pod's own containers reach memcached on.
func localPort(s *v1alpha1.MemcachedSpec) int {
	if s.TLS != nil {
		return LocalPort
	}
	return Port
}

// securityArgs are memcached's arguments for TLS and authentication.
func securityArgs(s *v1alpha1.MemcachedSpec) []string {
	var args []string
	if t := s.TLS; t != nil {
		// One -l: memcached drops a second one that is a substring of
		// the first. * is every address, over TLS.
		args = append(args, "-Z", "-o", tlsOptions(t), "-l", "*,notls:127.0.0.1:"+strconv.Itoa(LocalPort))
	}
	if a := s.Auth; a != nil {
		switch a.Mode {
		case v1alpha1.AuthModeASCII:
			args = append(args, "-Y", authDir+"/users")
		case v1alpha1.AuthModeSASL:
			args = append(args, "-S")
		}
	}
	return args
}

// tlsOptions are memcached's -o options for TLS: the files it loads at
// start and on SIGHUP, and how it treats clients.
func tlsOptions(t *v1alpha1.TLSSpec) string {
	// ssl_min_version takes a number: 2 is TLS 1.2, 3 is TLS 1.3.
	minVersion := map[string]string{"1.2": "2", "1.3": "3"}[t.MinVersion]
	opts := []string{"ssl_chain_cert=" + tlsDir + "/tls.crt", "ssl_key=" + tlsDir + "/tls.key", "ssl_min_version=" + minVersion}
	if t.ClientCertificates == v1alpha1.ClientCertificatesRequired {
		opts = append(opts, "ssl_ca_cert="+tlsDir+"/ca.crt", "ssl_verify_mode=2")
	}
	return strings.Join(opts, ",")
}

// securityEnv is memcached's environment for SASL: its password file and
// configuration, both written by the check container.
func securityEnv(s *v1alpha1.MemcachedSpec) []corev1.EnvVar {
	if s.Auth == nil || s.Auth.Mode != v1alpha1.AuthModeSASL {
		return nil
	}
	return []corev1.EnvVar{
		{Name: "MEMCACHED_SASL_PWDB", Value: saslDir + "/pwdb"},
		{Name: "SASL_CONF_PATH", Value: saslDir},
	}
}

// secured tells whether the Pod has Secrets to check and reload.
func secured(s *v1alpha1.MemcachedSpec) bool { return s.TLS != nil || s.Auth != nil }

// reloadsBySignal tells whether memcached must be told of a changed
// Secret: its certificates and the ASCII authentication file are read
// once; the SASL password file is read at every login.
func reloadsBySignal(s *v1alpha1.MemcachedSpec) bool {
	return s.TLS != nil || (s.Auth != nil && s.Auth.Mode == v1alpha1.AuthModeASCII)
}

// securityVolumes are the Pod's volumes for the Secrets. They are optional,
// so that a missing Secret starts the Pod and the check container says
// what is missing, rather than the Pod waiting on a mount.
func securityVolumes(s *v1alpha1.MemcachedSpec) []corev1.Volume {
	secret := func(name, secretName string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secretName, Optional: ptr(true), DefaultMode: ptr(int32(0o440)),
		}}}
	}
	var vs []corev1.Volume
	if s.TLS != nil {
		vs = append(vs, secret("tls", s.TLS.SecretName))
	}
	if s.Auth != nil {
		vs = append(vs, secret("auth", s.Auth.SecretName))
		if s.Auth.Mode == v1alpha1.AuthModeSASL {
			limit := resource.MustParse("1Mi")
			vs = append(vs, corev1.Volume{Name: "sasl", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: &limit,
			}}})
		}
	}
	return vs
}

// mounts are the volume mounts of the Secrets: read-only but for the SASL
// directory in the containers that write it.
func mounts(s *v1alpha1.MemcachedSpec, writesSASL bool) []corev1.VolumeMount {
	var ms []corev1.VolumeMount
	if s.TLS != nil {
		ms = append(ms, corev1.VolumeMount{Name: "tls", MountPath: tlsDir, ReadOnly: true})
	}
	if s.Auth != nil {
		ms = append(ms, corev1.VolumeMount{Name: "auth", MountPath: authDir, ReadOnly: true})
		if s.Auth.Mode == v1alpha1.AuthModeSASL {
			ms = append(ms, corev1.VolumeMount{Name: "sasl", MountPath: saslDir, ReadOnly: !writesSASL})
		}
	}
	return ms
}

// scriptContainer is a small container running a shell script with the
// memcached image's busybox.
func scriptContainer(s *v1alpha1.MemcachedSpec, name, script string) corev1.Container {
	return corev1.Container{
		Name:         name,
		Image:        s.Image,
		Command:      []string{"sh", "-c", script},
		VolumeMounts: mounts(s, true),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("8Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          restrictedContainer(),
	}
}

// trialAddress is the address the check's trial memcached is told to
// listen on: TEST-NET-1 (RFC 5737), on no interface, so that it exits
// once it has loaded its TLS files.
const trialAddress = "192.0.2.1"

// maxUserLine is the longest user:password line memcached reads whole: it
// reads lines of 255 characters, and SASL adds @ and the Pod's hostname
// (up to 64 characters) to the user and wants the sum under 253.
const maxUserLine = 180

// maxASCIIUsers is how many lines memcached reads from its ASCII
// authentication file; it ignores the rest.
const maxASCIIUsers = 8

// secretScript is what scripts/check.sh and scripts/reload.sh are
// rendered with: where the Secrets are, and what to check in them.
type secretScript struct {
	TLSDir, AuthDir, SASLDir string
	TLS                      *tlsCheck
	Auth                     *authCheck
	TrialAddress             string
	Port                     int
	// Seconds is how often reload looks at the Secrets.
	Seconds int
	// Signal: reload signals memcached (reloadsBySignal).
	Signal bool
}

type tlsCheck struct {
	Secret  string
	Keys    []string
	Options string
}

type authCheck struct {
	Secret      string
	ASCII, SASL bool
	MaxLine     int
	MaxUsers    int
}

func secretScriptOf(s *v1alpha1.MemcachedSpec) secretScript {
	sc := secretScript{TLSDir: tlsDir, AuthDir: authDir, SASLDir: saslDir, TrialAddress: trialAddress, Port: Port,
		Seconds: reloadSeconds, Signal: reloadsBySignal(s)}
	if t := s.TLS; t != nil {
		keys := []string{"tls.crt", "tls.key"}
		if t.ClientCertificates == v1alpha1.ClientCertificatesRequired {
			keys = append(keys, "ca.crt")
		}
		sc.TLS = &tlsCheck{Secret: t.SecretName, Keys: keys, Options: tlsOptions(t)}
	}
	if a := s.Auth; a != nil {
		sc.Auth = &authCheck{Secret: a.SecretName, ASCII: a.Mode == v1alpha1.AuthModeASCII, SASL: a.Mode == v1alpha1.AuthModeSASL,
			MaxLine: maxUserLine, MaxUsers: maxASCIIUsers}
	}
	return sc
}

// checkScript is the check container's (scripts/check.sh): it refuses to
// start memcached when a Secret is not usable, and for SASL writes
// memcached's SASL configuration and password file.
func checkScript(s *v1alpha1.MemcachedSpec) string { return render(checkScriptName, secretScriptOf(s)) }

// reloadScript (scripts/reload.sh) watches the Secrets' volumes for
// kubelet's update (the ..data symlink switched) and has memcached load
// them, once they pass the check container's checks: a Secret updated with
// a missing or malformed key leaves memcached with what it had. It loads
// them once at start too, for an update that came between the check
// container and the sidecar's first look, and retries a load that failed
// at the next look. It signals memcached only once memcached handles
// SIGHUP (which it does from its first instruction on; before that the
// signal would kill it).
func reloadScript(s *v1alpha1.MemcachedSpec) string {
	return render(reloadScriptName, secretScriptOf(s))
}
