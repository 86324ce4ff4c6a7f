//go:build linux

// Command playground is make up and make down: it starts the operator on a
// local control plane in the background (test/playground: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok with three
// fake Nodes, the real Metacontroller and the hook from this checkout, all
// on 127.0.0.1, manifests/ installed as the end-to-end suite installs it),
// and stops it again.
//
//	playground up --dir=DIR --root=REPO    start (or find running) and print the export line
//	playground down --dir=DIR              stop everything up started and remove DIR's files
//
// up starts a small supervisor (playground supervise, in a session of its
// own) that starts everything, tells up over a pipe how it goes, and then
// stays to stop its children in order on SIGTERM or SIGINT: the hook and
// the API server's clients, then kube-apiserver, then etcd. Its children
// die with it (Linux's parent-death signal). When one of them exits on its
// own, the supervisor stops the rest and writes why into DIR/stopped.
//
// up reads the programs' paths from the environment make up sets
// (KUBE_APISERVER_BIN, ... as for make test). Its last line on standard
// output is the one to copy:
//
//	export KUBECONFIG=DIR/kubeconfig PATH=DIR/bin:$PATH
//
// Progress, errors and where the logs are go to standard error.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "playground:", err)
		os.Exit(1)
	}
}

// usage is printed for a missing or unknown subcommand.
const usage = `usage:
  playground up --dir=DIR [--root=REPO]   start the playground in the background (make up)
  playground down --dir=DIR               stop it and remove DIR's files (make down)`

// run runs the subcommand args[1].
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		return fmt.Errorf("no subcommand\n%s", usage)
	}
	cmd, rest := args[1], args[2:]
	fs := newFlagSet(cmd, stderr)
	dir := fs.String("dir", "", "the playground's `directory`: its state, logs and kubeconfig (make up's UP_DIR)")
	root := fs.String("root", ".", "the repository's root `directory`, to build the hook from and install manifests/ from")
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q\n%s", cmd, fs.Args(), usage)
	}
	if *dir == "" {
		return fmt.Errorf("%s: --dir is required\n%s", cmd, usage)
	}
	d, err := openStateDir(*dir)
	if err != nil {
		return err
	}
	switch cmd {
	case "up":
		return up(ctx, d, *root, getenv, stdout, stderr)
	case "down":
		return down(ctx, d, stderr)
	case "supervise":
		return supervise(ctx, d, *root, getenv, stdout)
	default:
		return fmt.Errorf("unknown subcommand %q\n%s", cmd, usage)
	}
}
