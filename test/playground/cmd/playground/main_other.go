//go:build !linux

// Command playground is make up and make down; it needs Linux (see
// main.go).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "playground: make up needs Linux: its processes die with it by Linux's parent-death signal, and make down reads /proc")
	os.Exit(1)
}
