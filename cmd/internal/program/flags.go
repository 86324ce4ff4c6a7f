package program

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// Flags is a program's flag set, in kebab case, where every flag has an
// environment twin: --some-flag may also be set as PROGRAM_SOME_FLAG (the
// program's name and the flag's in upper case, dashes as underscores), and
// the command line wins. It holds the flags every program has: --version,
// --log-level and --log-format, and with StopFlags the graceful stop's.
type Flags struct {
	*flag.FlagSet
	// LogLevel and LogFormat are --log-level and --log-format; Logger
	// makes the log they say.
	LogLevel  slog.Level
	LogFormat string
	// Stop is --shutdown-delay and --shutdown-timeout, once StopFlags
	// has added them.
	Stop Stop
	// TLS is --tls-cert-file, --tls-key-file and --client-ca-file, once
	// TLSFlags has added them.
	TLS TLSFiles

	prefix  string
	version *bool
}

// NewFlags is the flag set of the program name, called as args[0]. The
// environment twins begin with the name: MEMCACHED_AGENT_ for
// memcached-agent. Its --help prints "Usage: ARGS[0] synopsis", then about
// (sentences that end with a line break), the environment's prefix and
// every flag, on stderr.
func NewFlags(name string, args []string, synopsis, about string, stderr io.Writer) *Flags {
	called := name
	if len(args) > 0 {
		called = args[0]
	}
	fs := flag.NewFlagSet(called, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &Flags{FlagSet: fs, prefix: envName(name) + "_"}
	f.version = fs.Bool("version", false, "print the version and the commit it was built from, and exit")
	fs.TextVar(&f.LogLevel, "log-level", slog.LevelInfo, "least `level` logged: debug, info, warn or error")
	fs.StringVar(&f.LogFormat, "log-format", "json", "log `format`: json or text")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s %s\n\n%sEvery flag may also be set as %s<NAME> in the environment.\n\nFlags:\n", fs.Name(), synopsis, about, f.prefix)
		fs.PrintDefaults()
	}
	return f
}

// envName is s in upper case, dashes as underscores.
func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// StopFlags adds --shutdown-delay and --shutdown-timeout, which set Stop,
// with the program's defaults and its words for what they wait for.
func (f *Flags) StopFlags(delay time.Duration, delayUsage string, timeout time.Duration, timeoutUsage string) {
	f.DurationVar(&f.Stop.Delay, "shutdown-delay", delay, delayUsage)
	f.DurationVar(&f.Stop.Timeout, "shutdown-timeout", timeout, timeoutUsage)
}

// TLSFiles are the files of a server's TLS: its certificate (chain) and
// key, and the CA bundle of the client certificates it accepts, each
// reloaded when it changes (see reload.ServerTLS).
type TLSFiles struct {
	Cert, Key, ClientCA string
}

// TLSFlags adds --tls-cert-file, --tls-key-file and --client-ca-file,
// which set TLS, with the program's words for what the certificate serves
// and what the client certificates are required for.
func (f *Flags) TLSFlags(certUsage, clientCAUsage string) {
	f.StringVar(&f.TLS.Cert, "tls-cert-file", "", certUsage)
	f.StringVar(&f.TLS.Key, "tls-key-file", "", "the PEM private key of --tls-cert-file, in this `file`; reloaded when it changes")
	f.StringVar(&f.TLS.ClientCA, "client-ca-file", "", clientCAUsage)
}

// Parse reads args (the program's name first) and then the environment
// for each flag the command line left unset. It returns flag.ErrHelp for
// --help and ErrVersion for --version (see Build.Exit); it refuses
// arguments that are not flags, and what no program can honour: a
// negative stop, a log format other than json and text, a certificate
// without its key (or the other way round), client certificates without
// TLS.
func (f *Flags) Parse(args []string, getenv func(string) string) error {
	if len(args) > 0 {
		args = args[1:]
	}
	if err := f.FlagSet.Parse(args); err != nil {
		return err
	}
	if *f.version {
		return ErrVersion
	}
	onCommandLine := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { onCommandLine[fl.Name] = true })
	var envErr error
	f.VisitAll(func(fl *flag.Flag) {
		name := f.prefix + envName(fl.Name)
		if v := getenv(name); v != "" && envErr == nil && !onCommandLine[fl.Name] {
			if err := fl.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	switch {
	case envErr != nil:
		return envErr
	case f.NArg() > 0:
		return fmt.Errorf("unexpected arguments: %q", f.Args())
	case f.Stop.Delay < 0 || f.Stop.Timeout < 0:
		return errors.New("--shutdown-delay and --shutdown-timeout must not be negative")
	case f.LogFormat != "json" && f.LogFormat != "text":
		return fmt.Errorf("--log-format must be json or text, got %q", f.LogFormat)
	case (f.TLS.Cert == "") != (f.TLS.Key == ""):
		return errors.New("--tls-cert-file and --tls-key-file go together")
	case f.TLS.ClientCA != "" && f.TLS.Cert == "":
		return errors.New("--client-ca-file needs --tls-cert-file and --tls-key-file: client certificates come with TLS")
	}
	return nil
}

// Logger is the log the flags ask for, written to w.
func (f *Flags) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: f.LogLevel}
	if f.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
