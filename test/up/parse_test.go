package up

import (
	"slices"
	"strings"
	"testing"
)

// TestTryItCommands checks the reading of the README's section: the one
// ```sh block after the heading and at most a paragraph, comments and
// blank lines left out, and a clear error for every other shape.
func TestTryItCommands(t *testing.T) {
	block := "```sh\nmake up\n\n# a comment\nkubectl get memcached -w   # Ctrl-C\nmake down\n```\n"
	want := []string{"make up", "kubectl get memcached -w   # Ctrl-C", "make down"}
	tests := []struct {
		name    string
		readme  string
		want    []string
		wantErr string
	}{
		{"block right after the heading", "# x\n\n## Try it\n\n" + block, want, ""},
		{"one paragraph first", "## Try it\n\nSome words\nover two lines.\n\n" + block + "\n## Next\n", want, ""},
		{"a heading that only starts the same", "## Try it with curl\n\n" + block, nil, `no "## Try it" section`},
		{"two paragraphs", "## Try it\n\none.\n\ntwo.\n\n" + block, nil, "more than one paragraph"},
		{"another kind of block", "## Try it\n\n```yaml\na: b\n```\n", nil, "want ```sh"},
		{"next section first", "## Try it\n\nwords\n\n## Install\n\n" + block, nil, "ends"},
		{"no block", "## Try it\n\nwords\n", nil, "no ```sh block"},
		{"empty block", "## Try it\n\n```sh\n\n```\n", nil, "is empty"},
		{"unclosed block", "## Try it\n\n```sh\nmake up\n", nil, "not closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tryItCommands(tt.readme)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("tryItCommands = %q, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("tryItCommands = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestExportDir checks the form make up's line and the README's must have.
func TestExportDir(t *testing.T) {
	tests := []struct {
		name, line, want string
	}{
		{"make up's", "export KUBECONFIG=/tmp/x/up/kubeconfig PATH=/tmp/x/up/bin:$PATH", "/tmp/x/up"},
		{"the README's", "export KUBECONFIG=$PWD/.cache/up/kubeconfig PATH=$PWD/.cache/up/bin:$PATH", "$PWD/.cache/up"},
		{"two directories", "export KUBECONFIG=/a/kubeconfig PATH=/b/bin:$PATH", ""},
		{"PATH replaced", "export KUBECONFIG=/a/kubeconfig PATH=/a/bin", ""},
		{"something after", "export KUBECONFIG=/a/kubeconfig PATH=/a/bin:$PATH; ls", ""},
		{"not export", "KUBECONFIG=/a/kubeconfig PATH=/a/bin:$PATH", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := exportDir(tt.line)
			if (err == nil) != (tt.want != "") || got != tt.want {
				t.Errorf("exportDir(%q) = %q, %v; want %q", tt.line, got, err, tt.want)
			}
		})
	}
}

// TestClassify checks what the test does with each line of the block.
func TestClassify(t *testing.T) {
	tests := []struct {
		line string
		want kind
	}{
		{"make up", makeUp},
		{"make down", makeDown},
		{"export KUBECONFIG=$PWD/.cache/up/kubeconfig PATH=$PWD/.cache/up/bin:$PATH", export},
		{"kubectl apply -f examples/memcached-sample.yaml", apply},
		{"kubectl get memcached -w          # Ctrl-C once READY shows 3", watch},
		{"kubectl get memcached --watch", watch},
		{"kubectl scale memcached/memcached-sample --replicas=5", scale},
		{"kubectl get memcached memcached-sample -o jsonpath='{.status.endpoints}'", other},
		{"kubectl get pods -o wide", other},
	}
	for _, tt := range tests {
		if got := classify(tt.line); got != tt.want {
			t.Errorf("classify(%q) = %d, want %d", tt.line, got, tt.want)
		}
	}
}

// TestConvergedRow checks when a row of kubectl get memcached -w counts as
// converged.
func TestConvergedRow(t *testing.T) {
	header := strings.Fields("NAME               SIZE   READY   AVAILABLE   IMAGE                     AGE")
	tests := []struct {
		name string
		row  string
		want bool
	}{
		{"converged", "memcached-sample   3      3       True        memcached:1.6.45-alpine   4s", true},
		{"not ready yet", "memcached-sample   3      0       False       memcached:1.6.45-alpine   0s", false},
		{"no status yet (empty cells)", "memcached-sample   3                                    0s", false},
		{"ready but not available", "memcached-sample   3      3       False       memcached:1.6.45-alpine   4s", false},
		{"another Memcached", "other              3      3       True        memcached:1.6.45-alpine   4s", false},
		{"another size", "memcached-sample   5      5       True        memcached:1.6.45-alpine   4s", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := convergedRow(header, strings.Fields(tt.row), "memcached-sample", 3); got != tt.want {
				t.Errorf("convergedRow(%q) = %v, want %v", tt.row, got, tt.want)
			}
		})
	}
}
