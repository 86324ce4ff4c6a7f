package program

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// ToolFlags is the flag set of a tool that make runs (apigen, apiref,
// chartgen): plain flags, without the environment twins, the log and
// --version of a long-running program's (NewFlags), since make passes a
// tool all it needs and a tool has nothing to log.
type ToolFlags struct {
	*flag.FlagSet
	synopsis string
	required []requiredFlag
}

type requiredFlag struct {
	name  string
	value *string
}

// NewToolFlags is the flag set of the tool whose synopsis is given, its
// name first ("apigen --crd FILE"); its errors and --help go to stderr.
func NewToolFlags(synopsis string, stderr io.Writer) *ToolFlags {
	name, _, _ := strings.Cut(synopsis, " ")
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &ToolFlags{FlagSet: fs, synopsis: synopsis}
}

// Required adds a string flag that Parse refuses to go without.
func (f *ToolFlags) Required(name, usage string) *string {
	v := f.String(name, "", usage)
	f.required = append(f.required, requiredFlag{name, v})
	return v
}

// Parse reads args, the tool's name first. It refuses arguments that are
// not flags, and a Required flag left empty, with the synopsis.
func (f *ToolFlags) Parse(args []string) error {
	if len(args) > 0 {
		args = args[1:]
	}
	if err := f.FlagSet.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (usage: %s)", f.Args(), f.synopsis)
	}
	for _, r := range f.required {
		if *r.value == "" {
			return fmt.Errorf("no --%s (usage: %s)", r.name, f.synopsis)
		}
	}
	return nil
}

// Transform is what f makes of the file at path; an error of f's names
// the file.
func Transform[T any](path string, f func([]byte) (T, error)) (T, error) {
	in, err := os.ReadFile(path)
	if err != nil {
		var zero T
		return zero, err
	}
	out, err := f(in)
	if err != nil {
		return out, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// Rewrite replaces the file at path with what edit makes of it, and leaves
// it untouched (its modification time too) when that is what it holds.
func Rewrite(path string, edit func([]byte) ([]byte, error)) error {
	var in []byte
	out, err := Transform(path, func(b []byte) ([]byte, error) {
		in = b
		return edit(b)
	})
	if err != nil || bytes.Equal(out, in) {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
