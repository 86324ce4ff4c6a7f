package memcachedtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

var block = testutil.Loopback("test/memcachedtest")

// TestStart runs memcached both ways Start knows (a port memcached picks,
// memcached's port on an address of the package's block) and holds it to
// answering there, as nobody when the test runs as root.
func TestStart(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(t *testing.T) Config
	}{
		{name: "a port memcached picks", cfg: func(*testing.T) Config { return Config{Args: []string{"-m", "16"}} }},
		{name: "port 11211 of an address of its own", cfg: func(t *testing.T) Config {
			return Config{IP: block.Lend(t), Port: 11211, Args: []string{"-m", "16"}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t, tt.cfg(t))
			if got, err := Ask(s.Addr(), "version\r\n"); got != "VERSION 1.6.45\r\n" {
				t.Errorf("version at %s = %q, %v", s.Addr(), got, err)
			}
			c := Dial(t, s.Addr())
			c.Set("k", []byte("v\r\nv"), "F7", "T60")
			if it, ok := c.Get("k"); !ok || string(it.Value) != "v\r\nv" || it.Flags != 7 || it.TTL <= 0 || it.TTL > 60 {
				t.Errorf("Get(k) = %+v, %v; want v\\r\\nv, flags 7, a TTL up to 60", it, ok)
			}
			c.Set("plain", []byte("p"))
			if got := c.Value("plain"); got != "p" {
				t.Errorf("Value(plain) = %q, want p", got)
			}
			if got, want := c.Stat("curr_items"), int64(2); got != want {
				t.Errorf("curr_items = %d, want %d", got, want)
			}
			if got, want := uidOf(t, s.PID()), wantUID(t); got != want {
				t.Errorf("memcached runs as uid %d, want %d", got, want)
			}
		})
	}
}

// wantUID is the user memcached must run as: nobody when the test runs as
// root, the test's own user otherwise.
func wantUID(t *testing.T) int {
	t.Helper()
	if os.Geteuid() != 0 {
		return os.Geteuid()
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	return uid
}

// uidOf is the effective uid of process pid, from Linux's /proc.
func uidOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "Uid:" {
			uid, _ := strconv.Atoi(f[2])
			return uid
		}
	}
	t.Fatalf("no Uid line in /proc/%d/status", pid)
	return -1
}

// envChild makes this test binary the one TestDiesWithTheTestBinary kills.
const envChild = "MEMCACHEDTEST_CHILD"

// TestDiesWithTheTestBinary kills a test binary that started memcached,
// as go test's -timeout or a developer's ^C\ does, and holds memcached to
// dying with it, however it runs (as nobody when run as root): a memcached
// left behind holds its address for the next run.
func TestDiesWithTheTestBinary(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		s := Start(t, Config{Args: []string{"-m", "16"}})
		fmt.Printf("memcached %d\n", s.PID())
		select {} // until killed
	}
	testutil.Program(t, EnvBin, "memcached 1.6.45")
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("only Linux ties a child's life to its parent: %v", err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestDiesWithTheTestBinary$", "-test.count=1")
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
	pid := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var n int
			if _, err := fmt.Sscanf(sc.Text(), "memcached %d", &n); err == nil {
				pid <- n
			}
		}
	}()
	var mc int
	select {
	case mc = <-pid:
	case <-exited:
		t.Fatalf("the test binary exited before starting memcached: %s", stderr.String())
	case <-time.After(StartTimeout + 10*time.Second):
		t.Fatalf("the test binary started no memcached: %s", stderr.String())
	}
	if !testutil.Alive(mc) {
		t.Fatalf("memcached %d is not running before the kill", mc)
	}
	// A memcached that outlives its test binary is this test's to end.
	t.Cleanup(func() {
		if testutil.Alive(mc) {
			syscall.Kill(mc, syscall.SIGKILL)
		}
	})
	child.Process.Signal(syscall.SIGKILL)
	<-exited
	testutil.Eventually(t, 10*time.Second, func() error {
		if testutil.Alive(mc) {
			return fmt.Errorf("memcached %d runs on after the test binary that started it was killed", mc)
		}
		return nil
	})
}
