package memcached_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/sync/contract"
	"github.com/example/memcached-operator/sync/memcached"
	"github.com/example/memcached-operator/test/dataplane"
	"github.com/example/memcached-operator/test/testutil"
)

// The scripts in scripts/ run here as the Pods run them: the bytes the hook
// answers, with sh and the tools from busybox (which the official Alpine
// images use), against real memcached where they talk to it. A test
// changes only what ties the script to a Pod: the Secrets' directory under
// /run, the loopback address, and waits shortened.

// memcachedPodSpec is the memcached Pod spec the hook answers for a spec
// (JSON).
func memcachedPodSpec(t *testing.T, spec string) corev1.PodSpec {
	t.Helper()
	body := withSpec(t, exampleRequest(t, filepath.Join("..", "..", "examples", "memcached-minimal.yaml")), spec)
	return parseAnswer(t, callHook(t, "sync", body, fixedNow)).deployment(t).Spec.Template.Spec
}

// shellScript is the script of a `sh -c SCRIPT` command.
func shellScript(t *testing.T, command []string) string {
	t.Helper()
	if len(command) != 3 || command[0] != "sh" || command[1] != "-c" {
		t.Fatalf("command %q is not sh -c SCRIPT", command)
	}
	return command[2]
}

// shell runs script with busybox's sh and applets on PATH, beside
// programs (name: path), in dir. It runs as nobody when the test runs as
// root, as memcached's image runs it (memcached refuses root).
func shell(t *testing.T, ctx context.Context, dir, script string, programs map[string]string) *exec.Cmd {
	t.Helper()
	busybox := testutil.Installed(t, "busybox", "the scripts run with busybox's sh and applets, as the official Alpine image has them (make test-tools installs it)")
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(busybox, "--install", "-s", bin).CombinedOutput(); err != nil {
		t.Fatalf("busybox --install: %v\n%s", err, out)
	}
	for name, path := range programs {
		os.Remove(filepath.Join(bin, name))
		if err := os.Symlink(path, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "sh"), "-c", script)
	cmd.Env = []string{"PATH=" + bin}
	cmd.Dir = dir
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	return cmd
}

// scratchDir is a directory the script's user can write in.
func scratchDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	mkdirs(t, filepath.Dir(dir), dir)
	return dir
}

// mkdirs makes directories the script's user can write in.
func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
}

// exitCode runs cmd and returns its standard output and error and its
// exit code.
func exitCode(t *testing.T, cmd *exec.Cmd) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// withLoopback points a script's nc at addr instead of memcached's port on
// loopback.
func withLoopback(t *testing.T, script, addr string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	from := fmt.Sprintf("127.0.0.1 %d", memcached.Port)
	if !strings.Contains(script, from) {
		t.Fatalf("script does not reach %s:\n%s", from, script)
	}
	return strings.ReplaceAll(script, from, host+" "+port)
}

func TestLivenessScript(t *testing.T) {
	script := shellScript(t, memcachedPodSpec(t, `{}`).Containers[0].LivenessProbe.Exec.Command)
	users := filepath.Join(scratchDir(t), "users")
	if err := os.WriteFile(users, []byte("alice:secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		addr     func(t *testing.T) string
		wantLive bool
	}{
		{"memcached answers", func(t *testing.T) string {
			return dataplane.StartMemcached(t, testutil.Loopback("sync/memcached").IP(1)).Addr()
		}, true},
		{"memcached with ASCII authentication answers", func(t *testing.T) string {
			return dataplane.StartMemcached(t, testutil.Loopback("sync/memcached").IP(2), "-Y", users).Addr()
		}, true},
		{"a hung memcached takes the connection and answers nothing", func(t *testing.T) string {
			l, err := net.Listen("tcp", testutil.Loopback("sync/memcached").IP(3)+":0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l.Addr().String()
		}, false},
		{"nothing listens", func(t *testing.T) string { return testutil.Loopback("sync/memcached").IP(4) + ":1" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := tc.addr(t)
			_, stderr, code := exitCode(t, shell(t, context.Background(), scratchDir(t), withLoopback(t, script, addr), nil))
			if got := code == 0; got != tc.wantLive {
				t.Errorf("live = %t (exit %d, %s), want %t", got, code, stderr, tc.wantLive)
			}
		})
	}
}

func TestPreStopScript(t *testing.T) {
	const handoff = 10
	script := shellScript(t, memcachedPodSpec(t, fmt.Sprintf(`{"rollout":{"keepWarm":true,"handoffSeconds":%d}}`, handoff)).
		Containers[0].Lifecycle.PreStop.Exec.Command)
	// The first sleep lets endpoints drop the Pod; the hand-off's wait
	// is shortened to wait seconds, counted by date +%s in whole seconds:
	// it lasts more than wait-1.
	const wait = 3
	for from, to := range map[string]string{"sleep 10\n": "sleep 0\n", fmt.Sprintf("+ %d ))", handoff): fmt.Sprintf("+ %d ))", wait)} {
		if !strings.Contains(script, from) {
			t.Fatalf("preStop has no %q:\n%s", from, script)
		}
		script = strings.Replace(script, from, to, 1)
	}
	for _, tc := range []struct {
		name string
		ip   string
		done bool // the agent set DoneKey
		// wantWait: the preStop waits out the hand-off's time.
		wantWait bool
	}{
		{"the hand-off is done", testutil.Loopback("sync/memcached").IP(5), true, false},
		{"the hand-off is not done", testutil.Loopback("sync/memcached").IP(6), false, true},
		{"memcached is gone", "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := testutil.Loopback("sync/memcached").IP(7) + ":1"
			if tc.ip != "" {
				addr = dataplane.StartMemcached(t, tc.ip).Addr()
			}
			if tc.done {
				set(t, addr, contract.DoneKey)
			}
			start := time.Now()
			_, stderr, code := exitCode(t, shell(t, context.Background(), scratchDir(t), withLoopback(t, script, addr), nil))
			if code != 0 {
				t.Errorf("exit %d (%s), want 0: a preStop passes whatever happens", code, stderr)
			}
			if got := time.Since(start) >= (wait-1)*time.Second; got != tc.wantWait {
				t.Errorf("waited %v, want the hand-off's %d s waited out: %t", time.Since(start).Round(time.Millisecond), wait, tc.wantWait)
			}
		})
	}
}

// set stores key on the memcached at addr, as the agent does once its
// hand-off is done.
func set(t *testing.T, addr, key string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "set %s 0 0 1\r\n1\r\n", key); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	if got := string(buf[:n]); got != "STORED\r\n" {
		t.Fatalf("set %s: %q", key, got)
	}
}

// secretDir is where the Pods mount the Secrets.
const secretDir = "/run/memcached/"

// writeFiles writes files (path under dir: content), readable by the
// script's user.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		mkdirs(t, filepath.Dir(path))
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCheckScript(t *testing.T) {
	memcachedBin := testutil.Program(t, "MEMCACHED_BIN", "memcached")
	ca := testutil.NewCA(t, "scripts")
	certPEM, keyPEM := ca.Issue(t, "memcached")
	otherPEM, _ := ca.Issue(t, "other")
	cert, key, otherCert, caCert := string(certPEM), string(keyPEM), string(otherPEM), string(ca.PEM)
	const (
		ascii = `{"auth":{"secretName":"users","mode":"ASCII"}}`
		sasl  = `{"auth":{"secretName":"users","mode":"SASL"}}`
		tls   = `{"tls":{"secretName":"certs"}}`
		mtls  = `{"tls":{"secretName":"certs","clientCertificates":"Required"}}`
	)
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		spec  string
		files map[string]string
		// want is the last line the check writes: on standard error
		// when it refuses (the termination message), else on standard
		// output.
		want string
		// wantFiles are files the check writes, with their content.
		wantFiles map[string]string
	}{
		{"ASCII users", ascii, map[string]string{"auth/users": "alice:secret\nbob:pw\n"}, "the Secrets are ready", nil},
		{"no users", ascii, map[string]string{"auth/other": "x"},
			`spec.auth.secretName: Secret "users" has no users, or does not exist`, nil},
		{"an empty line", ascii, map[string]string{"auth/users": "alice:secret\n\nbob:pw\n"},
			`spec.auth.secretName: Secret "users": users must hold one user:password a line, and no empty line`, nil},
		{"a user without a password", ascii, map[string]string{"auth/users": "alice\n"},
			`spec.auth.secretName: Secret "users": users must hold one user:password a line, and no empty line`, nil},
		{"a line longer than memcached reads", ascii, map[string]string{"auth/users": "alice:" + strings.Repeat("x", 175) + "\n"},
			`spec.auth.secretName: Secret "users": a line of users is at most 180 characters`, nil},
		{"a line as long as memcached reads", ascii, map[string]string{"auth/users": "alice:" + strings.Repeat("x", 174) + "\n"},
			"the Secrets are ready", nil},
		{"nine ASCII users", ascii, map[string]string{"auth/users": strings.Repeat("alice:secret\n", 9)},
			`spec.auth.secretName: Secret "users": ASCII authentication takes at most 8 users`, nil},
		{"a colon in a SASL password", sasl, map[string]string{"auth/users": "alice:se:cret\n"},
			`spec.auth.secretName: Secret "users": under SASL a password cannot hold a colon`, nil},
		{"SASL users", sasl, map[string]string{"auth/users": "alice:secret\ncarol@realm:pw\n"}, "the Secrets are ready",
			map[string]string{"sasl/pwdb": "alice@" + hostname + ":secret\ncarol@realm:pw\n", "sasl/memcached.conf": "mech_list: plain\n"}},
		{"a TLS pair memcached loads", tls, map[string]string{"tls/tls.crt": cert, "tls/tls.key": key}, "the Secrets are ready", nil},
		{"no TLS key", tls, map[string]string{"tls/tls.crt": cert},
			`spec.tls.secretName: Secret "certs" has no tls.key, or does not exist`, nil},
		{"a TLS key that is not PEM", tls, map[string]string{"tls/tls.crt": cert, "tls/tls.key": "secret"},
			`spec.tls.secretName: Secret "certs": tls.key is not PEM`, nil},
		{"a TLS key of another certificate", tls, map[string]string{"tls/tls.crt": otherCert, "tls/tls.key": key},
			`spec.tls.secretName: Secret "certs": memcached cannot load it: `, nil},
		{"client certificates without a CA", mtls, map[string]string{"tls/tls.crt": cert, "tls/tls.key": key},
			`spec.tls.secretName: Secret "certs" has no ca.crt, or does not exist`, nil},
		{"client certificates with a CA", mtls, map[string]string{"tls/tls.crt": cert, "tls/tls.key": key, "tls/ca.crt": caCert},
			"the Secrets are ready", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := memcachedPodSpec(t, tc.spec)
			if len(spec.InitContainers) != 1 {
				t.Fatalf("%d init containers, want the check", len(spec.InitContainers))
			}
			dir := scratchDir(t)
			writeFiles(t, dir, tc.files)
			mkdirs(t, filepath.Join(dir, "sasl"))
			script := strings.ReplaceAll(shellScript(t, spec.InitContainers[0].Command), secretDir, dir+"/")
			stdout, stderr, code := exitCode(t, shell(t, context.Background(), dir, script, map[string]string{"memcached": memcachedBin}))
			out := stdout
			if tc.want != "the Secrets are ready" {
				out = stderr
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if got := lines[len(lines)-1]; !strings.HasPrefix(got, tc.want) || (got != tc.want && !strings.HasSuffix(tc.want, ": ")) {
				t.Errorf("last line %q (exit %d), want %q\nstdout: %s\nstderr: %s", got, code, tc.want, stdout, stderr)
			}
			if gotOK, wantOK := code == 0, tc.want == "the Secrets are ready"; gotOK != wantOK {
				t.Errorf("exit %d, want success %t", code, wantOK)
			}
			for name, want := range tc.wantFiles {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || string(got) != want {
					t.Errorf("%s = %q (%v), want %q", name, got, err, want)
				}
			}
		})
	}
}

// TestReloadScript runs the reload sidecar as kubelet updates the Secret (a
// new ..data directory, one symlink switched): under SASL it rewrites the
// password file; under ASCII authentication it has a real memcached reload
// its users file with SIGHUP. The memcached it signals is found by pidof,
// which in a Pod sees the Pod's processes only: here a stand-in pidof
// names the test's own memcached, not every memcached of the machine.
func TestReloadScript(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode string
		// check tells whether the users file's password for alice is
		// in use.
		check func(t *testing.T, dir, password string) bool
	}{
		{"SASL rewrites the password file", "SASL", func(t *testing.T, dir, password string) bool {
			hostname, _ := os.Hostname()
			got, err := os.ReadFile(filepath.Join(dir, "sasl", "pwdb"))
			return err == nil && string(got) == "alice@"+hostname+":"+password+"\n"
		}},
		{"ASCII authentication signals memcached", "ASCII", func(t *testing.T, dir, password string) bool {
			return asciiLogin(t, testutil.Loopback("sync/memcached").IP(8), "alice", password)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := memcachedPodSpec(t, `{"auth":{"secretName":"users","mode":"`+tc.mode+`"}}`)
			if len(spec.Containers) != 2 || spec.Containers[1].Name != "reload" {
				t.Fatalf("containers %v, want memcached and reload", spec.Containers)
			}
			dir := scratchDir(t)
			script := strings.ReplaceAll(shellScript(t, spec.Containers[1].Command), secretDir, dir+"/")
			const period = "while sleep 5; do"
			if !strings.Contains(script, period) {
				t.Fatalf("reload has no %q:\n%s", period, script)
			}
			script = strings.Replace(script, period, "while sleep 0.1; do", 1)
			mkdirs(t, filepath.Join(dir, "auth"), filepath.Join(dir, "sasl"))
			publish := kubeletSecret(t, filepath.Join(dir, "auth"))
			publish("..v1", "alice:one\n")
			programs := map[string]string{}
			if tc.mode == "ASCII" {
				m := dataplane.StartMemcached(t, testutil.Loopback("sync/memcached").IP(8), "-Y", filepath.Join(dir, "auth", "users"))
				pidof := filepath.Join(scratchDir(t), "pidof")
				writeFiles(t, filepath.Dir(pidof), map[string]string{"pidof": fmt.Sprintf("#!%s\necho %d\n", testutil.Installed(t, "sh", "a stand-in pidof"), pidOf(t, m.Addr()))})
				if err := os.Chmod(pidof, 0o755); err != nil {
					t.Fatal(err)
				}
				programs["pidof"] = pidof
			}

			ctx, cancel := context.WithCancel(context.Background())
			cmd := shell(t, ctx, dir, script, programs)
			log, err := os.Create(filepath.Join(t.TempDir(), "log"))
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			cmd.Stdout, cmd.Stderr = log, log
			logged := func() string {
				b, _ := os.ReadFile(log.Name())
				return string(b)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cancel(); _ = cmd.Wait() }()

			for _, step := range []struct {
				name, version, users, wantLog, wantPassword string
			}{
				{"at start", "", "", "memcached has the Secrets of ..v1", "one"},
				{"a new password", "..v2", "alice:two\n", "memcached has the Secrets of ..v2", "two"},
				{"an update that is not usable", "..v3", "alice:three\n\n",
					"a Secret changed but is not usable: memcached keeps the previous one", "two"},
			} {
				if step.version != "" {
					publish(step.version, step.users)
				}
				if !testutil.Poll(10*time.Second, func() bool { return strings.Contains(logged(), step.wantLog) }) {
					t.Fatalf("%s: the reload did not log %q:\n%s", step.name, step.wantLog, logged())
				}
				if !testutil.Poll(5*time.Second, func() bool { return tc.check(t, dir, step.wantPassword) }) {
					t.Errorf("%s: password %q is not in use", step.name, step.wantPassword)
				}
			}
		})
	}
}

// kubeletSecret returns a function that publishes a Secret's users into
// dir as kubelet updates a Secret volume: the files in a new directory,
// then the ..data symlink switched to it at once.
func kubeletSecret(t *testing.T, dir string) func(version, users string) {
	return func(version, users string) {
		t.Helper()
		writeFiles(t, dir, map[string]string{filepath.Join(version, "users"): users})
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(version, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "users")); err != nil {
			if err := os.Symlink("..data/users", filepath.Join(dir, "users")); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// pidOf finds the memcached process listening on addr by its arguments.
func pidOf(t *testing.T, addr string) int {
	t.Helper()
	host, _, _ := net.SplitHostPort(addr)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte("\x00-l\x00"+host+"\x00")) {
			var pid int
			if _, err := fmt.Sscan(filepath.Base(filepath.Dir(p)), &pid); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no memcached listens on %s", addr)
	return 0
}

// asciiLogin tells whether memcached on ip takes user and password, as
// ASCII authentication has a client log in: a set whose data is the
// user and the password.
func asciiLogin(t *testing.T, ip, user, password string) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, fmt.Sprint(memcached.Port)), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	cred := user + " " + password
	if _, err := fmt.Fprintf(c, "set auth 0 0 %d\r\n%s\r\n", len(cred), cred); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 128)
	n, _ := c.Read(buf)
	return string(buf[:n]) == "STORED\r\n"
}
