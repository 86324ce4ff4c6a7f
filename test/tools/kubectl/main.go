// Command kubectl is the upstream Kubernetes command-line client, built from
// the k8s.io/kubectl module at the version matching kube-apiserver.
//
// It mirrors k8s.io/kubernetes/cmd/kubectl/kubectl.go (v1.30: kubectl has no
// GetLogVerbosity there yet, so no early klog verbosity setup).
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	// Import to initialize client auth plugins.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		// Pretty-print the error and exit with an error.
		util.CheckErr(err)
	}
}
