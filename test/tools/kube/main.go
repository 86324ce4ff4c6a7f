// Command kube is the upstream kube-apiserver, kube-controller-manager and
// kube-scheduler in one binary, built from the k8s.io/kubernetes module so
// that the integration and end-to-end tests run a real control plane
// without downloading prebuilt binaries. It is run by the name it is called
// as (make kube-tools links the three names to it), as Kubernetes' own
// hyperkube was: the three share most of their packages, so one binary
// builds and links once.
//
// Each command mirrors its upstream main
// (k8s.io/kubernetes/cmd/<name>/<name>.go).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // for timeZone support in CronJob

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // load all the prometheus client-go plugins
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

var commands = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
}

func main() {
	name := filepath.Base(os.Args[0])
	newCommand, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "kube: run as kube-apiserver, kube-controller-manager or kube-scheduler (a link to this binary), not %q\n", name)
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}
