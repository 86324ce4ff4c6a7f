package memcached

import (
	"embed"
	"strconv"
	"strings"
	"text/template"
)

// The shell the Pods run (probes, preStop, the Secrets' check and reload)
// is in scripts/, as text/templates rendered with the spec's values. Their
// bytes are part of the Pod template: a change to one rolls every
// memcached Pod that runs it (see the upgrade notes in
// sync/api/v1alpha1/README.md).
//
//go:embed scripts/*.sh
var scriptFiles embed.FS

var scripts = template.Must(template.New("scripts").Funcs(template.FuncMap{
	"q":   strconv.Quote,
	"inc": func(n int) int { return n + 1 },
}).Option("missingkey=error").ParseFS(scriptFiles, "scripts/*.sh"))

// The scripts, by file name.
const (
	livenessScript   = "liveness.sh"
	preStopScript    = "prestop.sh"
	checkScriptName  = "check.sh"
	reloadScriptName = "reload.sh"
)

// render renders a script with data.
func render(name string, data any) string {
	var b strings.Builder
	if err := scripts.ExecuteTemplate(&b, name, data); err != nil {
		// The scripts are the binary's own and their data the hook's
		// types: an error is a bug, which the tests catch.
		panic(err)
	}
	return b.String()
}
