package monitoring

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// envChild makes this test binary the one TestProgramsDieWithTheTestBinary
// kills.
const envChild = "MONITORING_CHILD"

// TestProgramsDieWithTheTestBinary kills a test binary that started
// memcached_exporter and Prometheus through start, as go test's -timeout
// or a developer's ^C does, and holds both to dying with it (the hook,
// started the same way, too): a Prometheus left behind holds its address
// and its data directory, an exporter its port, for the next run.
func TestProgramsDieWithTheTestBinary(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		exporter := testutil.Program(t, "MEMCACHED_EXPORTER_BIN", "memcached_exporter (make memcached-exporter)")
		prometheus := testutil.Installed(t, "prometheus", "Debian's prometheus package")
		ip := loopback.Lend(t)
		// The exporter listens whether or not its memcached answers.
		addr := net.JoinHostPort(ip, fmt.Sprint(exporterPort))
		e := start(t, "memcached_exporter", addr, exporter, "--memcached.address="+net.JoinHostPort(ip, "11211"), "--web.listen-address="+addr)
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte("global: {}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := start(t, "prometheus", net.JoinHostPort(ip, "9090"), prometheus, "--config.file="+filepath.Join(dir, "prometheus.yml"),
			"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+net.JoinHostPort(ip, "9090"))
		fmt.Printf("started %d %d\n", e.cmd.Process.Pid, p.cmd.Process.Pid)
		select {} // until killed
	}
	testutil.Program(t, "MEMCACHED_EXPORTER_BIN", "memcached_exporter (make memcached-exporter)")
	testutil.Installed(t, "prometheus", "starts Prometheus (Debian's prometheus package: make debian-clients installs it)")
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("only Linux ties a child's life to its parent: %v", err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestProgramsDieWithTheTestBinary$", "-test.count=1")
	child.Env = append(os.Environ(), envChild+"=1")
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testutil.LockedBuffer
	child.Stderr = &stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { child.Wait(); close(exited) }()
	defer func() { child.Process.Kill(); <-exited }()
	started := make(chan []int, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "started "); ok {
				var pids []int
				for _, f := range strings.Fields(rest) {
					n, _ := strconv.Atoi(f)
					pids = append(pids, n)
				}
				started <- pids
			}
		}
	}()
	var pids []int
	select {
	case pids = <-started:
	case <-exited:
		t.Fatalf("the test binary exited before starting its programs: %s", stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the test binary started no programs: %s", stderr.String())
	}
	for _, pid := range pids {
		if !testutil.Alive(pid) {
			t.Fatalf("program %d is not running before the kill", pid)
		}
		// A program that outlives its test binary is this test's to end.
		t.Cleanup(func() {
			if testutil.Alive(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
	child.Process.Signal(syscall.SIGKILL)
	<-exited
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, pid := range pids {
			if testutil.Alive(pid) {
				return fmt.Errorf("program %d runs on after the test binary that started it was killed", pid)
			}
		}
		return nil
	})
}
