// Package up runs the top README's "Try it" commands as a newcomer would:
// make up, the export line it prints, each kubectl line, make down. Its
// test checks that the sample Memcached converges (to its size, then to
// the size kubectl scale asks for), that the endpoints line prints the
// Pods' addresses, and that make down leaves no process and no listening
// port. It runs the playground in a directory of its own (UP_DIR), so a
// developer's playground is left alone.
//
// This file reads the README: the commands are the section's contract,
// the one the README and make up share (see test/playground/README.md).
package up

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
)

// tryItHeading is the heading of the README's section.
const tryItHeading = "## Try it"

// tryItCommands returns the commands of the README's "Try it" section: the
// lines of the one ```sh block that follows the heading, after at most one
// paragraph, but blank lines and lines that are only a comment.
func tryItCommands(readme string) ([]string, error) {
	sc := bufio.NewScanner(strings.NewReader(readme))
	// Where the section is: before the heading, in the paragraph, in the
	// block.
	const (
		before = iota
		prose
		block
	)
	where, paragraphs, inParagraph := before, 0, false
	var cmds []string
	for sc.Scan() {
		line := sc.Text()
		switch where {
		case before:
			if strings.TrimSpace(line) == tryItHeading {
				where = prose
			}
		case prose:
			trimmed := strings.TrimSpace(line)
			switch {
			case trimmed == "```sh":
				where = block
			case strings.HasPrefix(trimmed, "```"):
				return nil, fmt.Errorf("README: the first block after %q is %q, want ```sh", tryItHeading, trimmed)
			case strings.HasPrefix(trimmed, "#"):
				return nil, fmt.Errorf("README: %q ends (at %q) before any ```sh block", tryItHeading, trimmed)
			case trimmed == "":
				inParagraph = false
			case !inParagraph:
				inParagraph = true
				if paragraphs++; paragraphs > 1 {
					return nil, fmt.Errorf("README: more than one paragraph between %q and its ```sh block", tryItHeading)
				}
			}
		case block:
			trimmed := strings.TrimSpace(line)
			if trimmed == "```" {
				if len(cmds) == 0 {
					return nil, fmt.Errorf("README: the ```sh block of %q is empty", tryItHeading)
				}
				return cmds, nil
			}
			if trimmed != "" && !strings.HasPrefix(trimmed, "#") {
				cmds = append(cmds, trimmed)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	switch where {
	case before:
		return nil, fmt.Errorf("README: no %q section", tryItHeading)
	case prose:
		return nil, fmt.Errorf("README: no ```sh block after %q", tryItHeading)
	default:
		return nil, fmt.Errorf("README: the ```sh block of %q is not closed", tryItHeading)
	}
}

// exportForm matches the line make up prints and the README shows:
// export KUBECONFIG=DIR/kubeconfig PATH=DIR/bin:$PATH, one DIR twice.
var exportForm = regexp.MustCompile(`^export KUBECONFIG=(\S+)/kubeconfig PATH=(\S+)/bin:\$PATH$`)

// exportDir returns the DIR of an export line, or an error when the line
// does not have the form.
func exportDir(line string) (string, error) {
	m := exportForm.FindStringSubmatch(line)
	if m == nil {
		return "", fmt.Errorf("%q is not of the form export KUBECONFIG=DIR/kubeconfig PATH=DIR/bin:$PATH", line)
	}
	if m[1] != m[2] {
		return "", fmt.Errorf("%q names two directories, %s and %s", line, m[1], m[2])
	}
	return m[1], nil
}

// kind is what the test does with a command of the block.
type kind int

const (
	// other runs with a bounded time.
	other kind = iota
	// makeUp runs with the test's UP_DIR and prints the export line.
	makeUp
	// export is replaced by the line make up printed.
	export
	// watch streams until the output shows convergence, then stops.
	watch
	// apply applies a file: its Memcached is the one to follow.
	apply
	// scale sets a new size to converge to.
	scale
	// makeDown stops the playground; then nothing may be left.
	makeDown
)

// scaleArg finds the size in kubectl scale ... --replicas=N.
var scaleArg = regexp.MustCompile(`--replicas[= ](\d+)`)

// applyArg finds the file in kubectl apply -f FILE.
var applyArg = regexp.MustCompile(`(?:^|\s)-f[= ](\S+)`)

// classify says what kind of command line is.
func classify(line string) kind {
	fields := strings.Fields(line)
	has := func(f string) bool {
		for _, x := range fields {
			if x == f || strings.HasPrefix(x, f+"=") {
				return true
			}
		}
		return false
	}
	switch {
	case len(fields) >= 2 && fields[0] == "make" && fields[1] == "up":
		return makeUp
	case len(fields) >= 2 && fields[0] == "make" && fields[1] == "down":
		return makeDown
	case fields[0] == "export":
		return export
	case fields[0] == "kubectl" && (has("-w") || has("--watch")):
		return watch
	case fields[0] == "kubectl" && len(fields) > 1 && fields[1] == "apply" && applyArg.MatchString(line):
		return apply
	case fields[0] == "kubectl" && len(fields) > 1 && fields[1] == "scale" && scaleArg.MatchString(line):
		return scale
	default:
		return other
	}
}
