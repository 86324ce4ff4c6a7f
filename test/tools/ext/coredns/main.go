// The CoreDNS the tests run (test/dns): CoreDNS's own main, with only the
// plugins test/dns's Corefile uses instead of the seventy-odd of a release
// build, so that the first build compiles client-go and a few CoreDNS
// packages rather than every cloud provider's SDK. It is built in the ext
// module (test/tools/ext/go.mod), beside helm, controller-gen and
// memcached_exporter, which share its compiled dependencies.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
)

// init replaces the generated list of directives (core/dnsserver's
// zdirectives.go, every plugin of a release) with the ones linked in, in
// the order that list gives them: a Corefile naming any other plugin is
// refused at start instead of failing on a plugin that is not there.
func init() {
	dnsserver.Directives = []string{
		"bind",
		"errors",
		"log",
		"kubernetes",
	}
}

func main() {
	coremain.Run()
}
