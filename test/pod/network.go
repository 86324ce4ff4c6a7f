//go:build linux

package pod

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/example/memcached-operator/test/testutil"
)

// The Pods' network. Each Pod gets a veth pair: its host end, named
// mcpod<slot>, stays in the machine's network namespace; its other end is
// the Pod's eth0. Slot n of the Pod range is the /30 at n*4 in it: the host
// end takes its first address, the Pod its second, and each end's
// connected route reaches the other. The Pod has no other route, so it
// reaches the machine (at HostIP) and nothing else: not the other Pods,
// whatever the machine's ip_forward says.
//
// No file or lock allocates the slots: the kernel does. An interface name
// is unique in a network namespace, so creating mcpod<n> either takes slot
// n or fails with EEXIST, and a Pod then tries the next slot. That holds
// between the Pods of one test process and between test processes that run
// at once, on the one machine's namespace. A slot is free again when its
// interface is gone, and a veth pair goes with the network namespace that
// holds one end: when the sandbox ends, however the test process ended
// (its stdin closes when it dies, even by SIGKILL). end deletes it
// explicitly as well, to free it at once, since sockets still open into
// the namespace would keep it alive.
//
// Where no Pod is, the range is unreachable, as a cluster's Pod range is
// where no Pod is: connecting to an ended Pod's address fails at once
// with EHOSTUNREACH (no route to host), and a client marks the server
// failed and looks its name up again. Without it the address would fall
// to the machine's default route, and on some machines something there
// accepts every connection and answers HTTP 400 or nothing, which kept a
// client that looks a name up again only once a connection to it fails
// (libmemcached, PHP's memcached) sending to an ended Pod. The route that
// does it, unreachable <range> metric unreachableMetric, is the process's
// first Pod's to add (ip route replace, so adding it again changes
// nothing), is shared by every Pod and test process using the range (a
// Pod's /30 is more specific, and wins while the Pod lives), and stays
// after the tests: it is what a node outside the cluster's Pod range
// sees, and it leads nowhere. The harness knows it for its own: it is no
// Pod's leftover and does not make the range taken.
const (
	ifacePrefix = "mcpod"
	// slotTries bounds the search for a free slot from a random start.
	slotTries = 256
	// unreachableMetric is the metric of the range's unreachable route:
	// the highest there is, so that any other route to the same prefix
	// wins over it.
	unreachableMetric = math.MaxUint32
)

// podRanges are the ranges Pod addresses may come from. The first that no
// route of the machine touches (in any table; the Pods' own routes and the
// ranges' unreachable routes aside) is used. 10.244.0.0/16 is the Pod
// range of kind and flannel, so the addresses look like a cluster's; the
// others stand in on a machine that routes it (a VPN, a node of such a
// cluster).
var podRanges = []netip.Prefix{
	netip.MustParsePrefix("10.244.0.0/16"),
	netip.MustParsePrefix("10.245.0.0/16"),
	netip.MustParsePrefix("192.168.244.0/22"),
}

// podRange is the range this process chose, once.
var podRange struct {
	once   sync.Once
	prefix netip.Prefix
	err    error
}

// network is a Pod's veth pair and addresses.
type network struct {
	ip      string // the ip program
	iface   string // the host end's name
	ifindex int    // and its index: the name may be reused once it is gone
	subnet  netip.Prefix
	hostIP  netip.Addr
	podIP   netip.Addr
}

// route is a route as `ip -j route` prints it.
type route struct {
	Dst    string `json:"dst"`
	Dev    string `json:"dev"`
	Type   string `json:"type"`
	Table  string `json:"table"`
	Metric uint32 `json:"metric"`
}

// routes lists every IPv4 route of the machine, in every table.
func routes(ip string) ([]route, error) {
	out, err := exec.Command(ip, "-j", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return nil, fmt.Errorf("ip route show table all: %w", err)
	}
	var rs []route
	if err := json.Unmarshal(out, &rs); err != nil {
		return nil, fmt.Errorf("ip route show table all: %w", err)
	}
	return rs, nil
}

// prefix is a route's destination, or false for the default route.
func (r route) prefix() (netip.Prefix, bool) {
	if r.Dst == "default" {
		return netip.Prefix{}, false
	}
	dst := r.Dst
	if !strings.Contains(dst, "/") {
		dst += "/32"
	}
	p, err := netip.ParsePrefix(dst)
	return p, err == nil
}

func (r route) String() string {
	s := r.Dst
	if r.Type != "" {
		s = r.Type + " " + s
	}
	if r.Dev != "" {
		s += " dev " + r.Dev
	}
	if r.Table != "" {
		s += " table " + r.Table
	}
	if r.Metric != 0 {
		s += " metric " + strconv.FormatUint(uint64(r.Metric), 10)
	}
	return s
}

// isRangeRoute tells whether r is the unreachable route the harness keeps
// for one of podRanges (unreachableRange), in the main table.
func (r route) isRangeRoute() bool {
	if r.Type != "unreachable" || r.Metric != unreachableMetric || r.Table != "" {
		return false
	}
	p, ok := r.prefix()
	return ok && slices.Contains(podRanges, p)
}

// unreachableRange makes rng unreachable but where a Pod is (see the
// network's comment above): its unreachable route, replaced if it is
// there already, so that Pods and test processes starting at once all
// may add it.
func unreachableRange(ip string, rng netip.Prefix) error {
	m := strconv.FormatUint(unreachableMetric, 10)
	if out, err := exec.Command(ip, "route", "replace", "unreachable", rng.String(), "metric", m).CombinedOutput(); err != nil {
		return fmt.Errorf("ip route replace unreachable %s metric %s: %v: %s", rng, m, err, bytes.TrimSpace(out))
	}
	return nil
}

// chooseRange returns the first of podRanges that overlaps no route of the
// machine but the Pods' own and the ranges' unreachable routes.
func chooseRange(ip string) (netip.Prefix, error) {
	rs, err := routes(ip)
	if err != nil {
		return netip.Prefix{}, err
	}
	var taken []string
	for _, candidate := range podRanges {
		var clash []string
		for _, r := range rs {
			if strings.HasPrefix(r.Dev, ifacePrefix) || r.isRangeRoute() {
				continue
			}
			if p, ok := r.prefix(); ok && p.Overlaps(candidate) {
				clash = append(clash, r.String())
			}
		}
		if len(clash) == 0 {
			return candidate, nil
		}
		taken = append(taken, fmt.Sprintf("%s (%s)", candidate, strings.Join(clash, "; ")))
	}
	return netip.Prefix{}, fmt.Errorf("every range Pod addresses may come from is routed on this machine: %s", strings.Join(taken, ", "))
}

// slotSubnet is slot n's /30 in rng.
func slotSubnet(rng netip.Prefix, n int) netip.Prefix {
	b := rng.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n) * 4
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 30)
}

// startNetwork gives the sandbox (process pid) its eth0 and address.
func startNetwork(ip string, pid int) (*network, error) {
	podRange.once.Do(func() {
		podRange.prefix, podRange.err = chooseRange(ip)
		if podRange.err == nil {
			podRange.err = unreachableRange(ip, podRange.prefix)
		}
	})
	if podRange.err != nil {
		return nil, podRange.err
	}
	rng := podRange.prefix
	slots := 1 << (32 - rng.Bits()) / 4
	first := rand.IntN(slots)
	for i := range min(slots, slotTries) {
		slot := (first + i) % slots
		name := ifacePrefix + strconv.Itoa(slot)
		out, err := exec.Command(ip, "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(pid)).CombinedOutput()
		if err != nil {
			if bytes.Contains(out, []byte("File exists")) {
				continue // another Pod holds the slot
			}
			if bytes.Contains(out, []byte("Unknown device type")) || bytes.Contains(out, []byte("not supported")) {
				return nil, fmt.Errorf("%w (ip link add type veth: %s)", errNoVeth, bytes.TrimSpace(out))
			}
			return nil, fmt.Errorf("ip link add %s type veth: %v: %s", name, err, bytes.TrimSpace(out))
		}
		subnet := slotSubnet(rng, slot)
		n := &network{ip: ip, iface: name, subnet: subnet, hostIP: subnet.Addr().Next(), podIP: subnet.Addr().Next().Next()}
		if n.ifindex, err = ifindex(name); err != nil {
			return n, err
		}
		host := fmt.Sprintf("addr add %s/30 dev %s\nlink set %s up\n", n.hostIP, name, name)
		if out, err := batch(exec.Command(ip, "-batch", "-"), host); err != nil {
			return n, fmt.Errorf("the host end %s: %v: %s", name, err, out)
		}
		pod := fmt.Sprintf("addr add %s/30 dev eth0\nlink set eth0 up\n", n.podIP)
		if out, err := batch(exec.Command("nsenter", "--target", strconv.Itoa(pid), "--net", "--", ip, "-batch", "-"), pod); err != nil {
			return n, fmt.Errorf("the Pod's eth0: %v: %s", err, out)
		}
		return n, nil
	}
	return nil, fmt.Errorf("no free slot for a Pod in %s after %d tries (interfaces %s*)", rng, min(slots, slotTries), ifacePrefix)
}

// batch runs an ip -batch command with its commands on standard input.
func batch(cmd *exec.Cmd, commands string) ([]byte, error) {
	cmd.Stdin = strings.NewReader(commands)
	out, err := cmd.CombinedOutput()
	return bytes.TrimSpace(out), err
}

// ifindex is an interface's index, from sysfs.
func ifindex(name string) (int, error) {
	b, err := os.ReadFile("/sys/class/net/" + name + "/ifindex")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// exists tells whether the Pod's host end is still there: an interface of
// its name and index (another Pod may have taken the name since).
func (n *network) exists() bool {
	i, err := ifindex(n.iface)
	return err == nil && i == n.ifindex
}

// remove deletes the veth pair, both ends, if its host end is still the
// Pod's. The caller holds the sandbox, so that the name cannot have gone
// to another Pod in between.
func (n *network) remove() error {
	if !n.exists() {
		return nil
	}
	out, err := exec.Command(n.ip, "link", "del", n.iface).CombinedOutput()
	if err != nil && n.exists() {
		return fmt.Errorf("ip link del %s: %v: %s", n.iface, err, bytes.TrimSpace(out))
	}
	return nil
}

// leftovers lists what the Pod left on the machine, waiting up to timeout
// for the kernel to finish: its host end, and any route to its /30 on an
// interface that is still its own (the range's unreachable route is
// meant to stay).
func (n *network) leftovers(timeout time.Duration) []string {
	var left []string
	testutil.Poll(timeout, func() bool {
		left = nil
		if n.exists() {
			left = append(left, fmt.Sprintf("interface %s (index %d)", n.iface, n.ifindex))
		}
		rs, err := routes(n.ip)
		if err != nil {
			left = append(left, err.Error())
			return false
		}
		for _, r := range rs {
			p, ok := r.prefix()
			if !ok || !p.Overlaps(n.subnet) || r.isRangeRoute() {
				continue
			}
			// A route to the /30 on another interface of the same name
			// is a newer Pod's, which took the slot.
			if i, err := ifindex(r.Dev); err != nil || i == n.ifindex {
				left = append(left, "route "+r.String())
			}
		}
		return len(left) == 0
	})
	return left
}

// IP is the Pod's address, as status.podIP: the test process reaches the
// Pod's ports there, as a client in the cluster would.
func (p *Pod) IP() string { return p.net.podIP.String() }

// Addr is "IP:port".
func (p *Pod) Addr(port int) string { return net.JoinHostPort(p.IP(), strconv.Itoa(port)) }

// HostIP is the address the Pod reaches the machine at, as status.hostIP:
// the host end of its veth pair. A process of the test that listens there
// (or on every address) is reachable from the Pod.
func (p *Pod) HostIP() string { return p.net.hostIP.String() }

// errNoVeth tells that the kernel cannot make veth pairs.
var errNoVeth = errors.New("the kernel makes no veth pair")
