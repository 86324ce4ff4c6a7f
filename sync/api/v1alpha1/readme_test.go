package v1alpha1

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/crdschema"
)

// The reference tables of README.md are generated from the CRD, which is
// generated from this package (cmd/apiref's test and make verify-generate
// fail when either is stale), so they state the settings' defaults and
// bounds as settings.go does. These tests check what is written by hand:
// the doc comments that name memcached's flags, and the README's prose.

// TestDescriptionsNameTheFlags checks that the description of each
// memcached setting names its flag, and that extraArgs' lists every flag it
// may not set.
func TestDescriptionsNameTheFlags(t *testing.T) {
	for _, st := range Settings {
		short, _ := st.Flags()
		if short == "" {
			continue
		}
		if d := crdschema.Description(t, "spec."+st.Field()); !namesFlag(d, short) {
			t.Errorf("the description of spec.%s does not name %s: %q", st.Field(), short, d)
		}
	}
	extra := crdschema.Description(t, "spec.memcached.extraArgs")
	for _, letter := range managedShort {
		if !namesFlag(extra, "-"+string(letter)) {
			t.Errorf("the description of spec.memcached.extraArgs does not list -%c among the flags it may not set", letter)
		}
	}
}

// namesFlag tells whether text names the option flag ("-v"), as a word of
// its own: "-v," does, "-vv" does not.
func namesFlag(text, flag string) bool {
	return regexp.MustCompile(`(^|[^-\w])` + regexp.QuoteMeta(flag) + `($|[^\w])`).MatchString(text)
}

// TestREADMEMemoryFormula checks the README's figures of the memory
// formula against MemoryOf.
func TestREADMEMemoryFormula(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var plain, tls MemcachedSpec
	tls.TLS = &TLSSpec{}
	plain.Default()
	tls.Default()
	for _, want := range []string{
		fmt.Sprintf("(%dMi for the defaults)", MemoryOf(&plain)),
		fmt.Sprintf("with %d instead of %d under `tls` (%dMi)", tlsConnectionKiB, connectionKiB, MemoryOf(&tls)),
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
}
