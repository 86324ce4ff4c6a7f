// Command etcd is the upstream etcd server, built from the
// go.etcd.io/etcd/server/v3 module so that integration tests can run a real
// kube-apiserver storage backend without downloading prebuilt binaries.
//
// It mirrors go.etcd.io/etcd/server/v3/main.go.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
