package hygiene

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"go/build"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/example/memcached-operator/test/testutil"
)

// maxSize is the largest file the repository may hold, 1 MiB. The largest
// today are CRDs of about 130 KB; a file over this is a build output, a
// download or data that the Makefile should make into .cache instead.
const maxSize = 1 << 20

// TestNoLargeOrBinaryFiles fails on any file of the repository over 1 MiB,
// any executable binary (ELF, Mach-O, PE, WebAssembly), and any file with
// the executable bit that is not a script starting with #!.
//
// In a git work tree the files are what git tracks, plus the untracked
// files .gitignore lets through (what `git add -A` would commit), and the
// executable bit is the one git records. Anywhere else (an exported
// archive; a checkout git refuses to read because another user owns it)
// the files are every file the checkout's own .gitignore files let
// through, listed by git with a throw-away repository, and the executable
// bit is the file system's.
func TestNoLargeOrBinaryFiles(t *testing.T) {
	root := repoRoot(t)
	files, how := repositoryFiles(t, root)
	if len(files) == 0 {
		t.Fatalf("found no files under %s (%s)", root, how)
	}
	t.Logf("checked %d files: %s", len(files), how)
	for _, f := range files {
		problem, err := check(filepath.Join(root, filepath.FromSlash(f.path)), f.executable)
		if err != nil {
			t.Errorf("%s: %v", f.path, err)
		} else if problem != "" {
			t.Errorf("%s: %s", f.path, problem)
		}
	}
}

// TestCheck runs check on files made for it, so that the test above is
// known to catch what it is for.
func TestCheck(t *testing.T) {
	self, err := os.Executable() // this test's own binary: ELF, Mach-O or PE
	if err != nil {
		t.Fatal(err)
	}
	selfBytes, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	pe := make([]byte, 0x100)
	copy(pe, "MZ")
	binary.LittleEndian.PutUint32(pe[0x3c:], 0x80)
	copy(pe[0x80:], "PE\x00\x00")
	tests := []struct {
		name       string
		content    []byte
		executable bool
		want       string // what the problem says; "" for none
	}{
		{"text", []byte("# README\n"), false, ""},
		{"empty", nil, false, ""},
		{"script with the executable bit", []byte("#!/usr/bin/env bash\nmake test\n"), true, ""},
		{"text with the executable bit", []byte("make test\n"), true, "executable bit"},
		{"exactly 1 MiB", bytes.Repeat([]byte("a"), maxSize), false, ""},
		{"over 1 MiB", bytes.Repeat([]byte("a"), maxSize+1), false, "over 1 MiB"},
		{"this test's binary", selfBytes, true, "executable binary"},
		{"this test's binary without the executable bit", selfBytes, false, "executable binary"},
		{"ELF", []byte("\x7fELF\x02\x01\x01\x00"), false, "(ELF)"},
		{"Mach-O 64-bit", []byte("\xcf\xfa\xed\xfe\x07\x00\x00\x01"), false, "(Mach-O)"},
		{"Mach-O universal", []byte("\xca\xfe\xba\xbe\x00\x00\x00\x02"), false, "(Mach-O)"},
		{"PE", pe, false, "(PE)"},
		{"MZ that is not PE", []byte("MZ is how this text starts\n"), false, ""},
		{"WebAssembly", []byte("\x00asm\x01\x00\x00\x00"), false, "(WebAssembly)"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			if err := os.WriteFile(p, tt.content, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := check(p, tt.executable)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("check = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestBuildOutputsAreIgnored checks that .gitignore keeps out what the
// Makefile and go build write into the checkout: bin/ and .cache/, go test
// -c's binaries, and for every main package of every module, what go build
// writes at the module's root and inside the package's own directory. A new
// command needs its lines in .gitignore; this test names them.
//
// Only the checkout's .gitignore files count, not .git/info/exclude or a
// personal excludes file: git is asked through a throw-away repository
// whose work tree is the checkout.
func TestBuildOutputsAreIgnored(t *testing.T) {
	root := repoRoot(t)
	outputs := map[string]string{
		"bin/memcached-hook":                     "make build",
		".cache":                                 "make test's tools, make up's state",
		"cmd/memcached-hook/memcached-hook.test": "go test -c",
		"memcached-hook.test":                    "go test -c",
		"cpu.out":                                "go test -cpuprofile",
		"memcached-hook.exe":                     "GOOS=windows go build",
	}
	mains := mainPackages(t, root)
	if !slices.Contains(mains, "cmd/memcached-hook") {
		t.Fatalf("found the main packages %v, which lack cmd/memcached-hook", mains)
	}
	for _, dir := range mains {
		name := path.Base(dir)
		outputs[path.Join(dir, name)] = "go build inside " + dir
		module := moduleRoot(t, root, dir)
		out := path.Join(module, name)
		if fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(out))); err == nil && fi.IsDir() {
			continue // go build ./NAME refuses to overwrite a directory
		}
		outputs[out] = fmt.Sprintf("go build ./%s in %s", strings.TrimPrefix(strings.TrimPrefix(dir, module), "/"), moduleName(module))
	}
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range outputs {
			if !yield(p) {
				return
			}
		}
	})
	ignored := checkIgnore(t, root, paths)
	for _, p := range paths {
		if !ignored[p] {
			t.Errorf("%s (written by %s) is not ignored: add the line /%s to .gitignore", p, outputs[p], p)
		}
	}
	// And the other way round: nothing the repository needs is ignored.
	for _, p := range []string{"cmd/memcached-hook/main.go", "Makefile", "Dockerfile", "go.mod", "README.md", ".ci/run", "test/tools/kube/main.go"} {
		if checkIgnore(t, root, []string{p})[p] {
			t.Errorf("%s is ignored, and must not be", p)
		}
	}
}

// check says what is wrong with the file at p, or "" when nothing is.
// executable is whether its executable bit is set.
func check(p string, executable bool) (string, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil // deleted in the work tree, or a test's file already gone
	}
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", nil // a symbolic link or a submodule
	}
	var problems []string
	if fi.Size() > maxSize {
		problems = append(problems, fmt.Sprintf("%d bytes, over 1 MiB: have the Makefile make it into .cache/ (ignored) instead of committing it", fi.Size()))
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	kind, err := binaryKind(f)
	if err != nil {
		return "", err
	}
	switch {
	case kind != "":
		problems = append(problems, "an executable binary ("+kind+"): build it with the Makefile into bin/ or .cache/ (both ignored) instead of committing it")
	case executable:
		head := make([]byte, 2)
		if n, _ := f.ReadAt(head, 0); n < 2 || string(head) != "#!" {
			problems = append(problems, "the executable bit is set, and it is not a script starting with #! (chmod -x, or git update-index --chmod=-x)")
		}
	}
	return strings.Join(problems, "; "), nil
}

// binaryKind names the executable format f is in by its first bytes:
// ELF (Linux, shared objects too), Mach-O (macOS, universal ones too), PE
// (Windows: "MZ", then "PE\0\0" where the DOS header points), WebAssembly;
// "" for anything else.
func binaryKind(f io.ReaderAt) (string, error) {
	head := make([]byte, 64)
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return "", err
	}
	head = head[:n]
	for _, m := range []struct{ magic, kind string }{
		{"\x7fELF", "ELF"},
		{"\xfe\xed\xfa\xce", "Mach-O"}, {"\xce\xfa\xed\xfe", "Mach-O"},
		{"\xfe\xed\xfa\xcf", "Mach-O"}, {"\xcf\xfa\xed\xfe", "Mach-O"},
		{"\xca\xfe\xba\xbe", "Mach-O"}, // universal; Java class files start so too
		{"\x00asm", "WebAssembly"},
	} {
		if bytes.HasPrefix(head, []byte(m.magic)) {
			return m.kind, nil
		}
	}
	if bytes.HasPrefix(head, []byte("MZ")) && len(head) >= 0x40 {
		sig := make([]byte, 4)
		if _, err := f.ReadAt(sig, int64(binary.LittleEndian.Uint32(head[0x3c:]))); err == nil && string(sig) == "PE\x00\x00" {
			return "PE", nil
		}
	}
	return "", nil
}

// file is a file of the repository.
type file struct {
	path       string // slash-separated, from the root
	executable bool
}

// repositoryFiles lists the repository's files (see TestNoLargeOrBinaryFiles)
// and says how it found them.
func repositoryFiles(t *testing.T, root string) ([]file, string) {
	t.Helper()
	if top, err := gitOutput(root, nil, "rev-parse", "--show-toplevel"); err == nil && sameDir(strings.TrimSpace(string(top)), root) {
		var files []file
		for _, line := range split(mustGit(t, root, nil, "ls-files", "-z", "--stage")) {
			// <mode> <object> <stage>\t<path>
			meta, p, ok := strings.Cut(line, "\t")
			if !ok {
				t.Fatalf("git ls-files --stage: cannot read %q", line)
			}
			mode, _, _ := strings.Cut(meta, " ")
			if mode == "100644" || mode == "100755" {
				files = append(files, file{path: p, executable: mode == "100755"})
			}
		}
		files = slices.CompactFunc(files, func(a, b file) bool { return a.path == b.path }) // merge conflicts list a path per stage
		untracked := fromFileSystem(t, root, split(mustGit(t, root, nil, "ls-files", "-z", "--others", "--exclude-standard")))
		return append(files, untracked...), "a git work tree: git ls-files, tracked files and the untracked ones .gitignore lets through"
	}
	gitDir, env := throwaway(t)
	out := mustGit(t, root, env, "--git-dir="+gitDir, "--work-tree="+root, "ls-files", "-z", "--others", "--exclude-standard")
	return fromFileSystem(t, root, split(out)), "not a git work tree: every file the checkout's .gitignore files let through"
}

// fromFileSystem makes files of paths, with the file system's executable
// bit; a path that is gone by now is left out.
func fromFileSystem(t *testing.T, root string, paths []string) []file {
	t.Helper()
	var files []file
	for _, p := range paths {
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file{path: p, executable: fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0})
	}
	return files
}

// checkIgnore says which of paths the checkout's .gitignore files ignore.
func checkIgnore(t *testing.T, root string, paths []string) map[string]bool {
	t.Helper()
	gitDir, env := throwaway(t)
	cmd := exec.Command("git", "--git-dir="+gitDir, "--work-tree="+root, "check-ignore", "--no-index", "-z", "--stdin")
	cmd.Dir, cmd.Env = root, env
	cmd.Stdin = strings.NewReader(strings.Join(paths, "\x00") + "\x00")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	// check-ignore exits 1 when it ignores none of the paths.
	if err != nil && !(cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 1 && stderr.Len() == 0) {
		t.Fatalf("git check-ignore: %v\n%s", err, stderr.Bytes())
	}
	ignored := map[string]bool{}
	for _, p := range split(out) {
		ignored[p] = true
	}
	return ignored
}

// mainPackages lists the directories of main packages under root, slash
// separated, skipping what the go command skips (testdata, names starting
// with . or _) and symbolic links (.cache may be one).
func mainPackages(t *testing.T, root string) []string {
	t.Helper()
	var mains []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		pkg, err := build.Default.ImportDir(p, 0)
		var noGo *build.NoGoError
		switch {
		case errors.As(err, &noGo):
			return nil
		case err != nil:
			return fmt.Errorf("%s: %w", p, err)
		case pkg.Name == "main":
			rel, _ := filepath.Rel(root, p)
			mains = append(mains, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mains
}

// moduleRoot is the directory of the go.mod that dir belongs to, slash
// separated from root ("" for root's own).
func moduleRoot(t *testing.T, root, dir string) string {
	t.Helper()
	for d := dir; d != "."; d = path.Dir(d) {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(d), "go.mod")); err == nil {
			return d
		}
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s belongs to no module: %v", dir, err)
	}
	return ""
}

func moduleName(dir string) string {
	if dir == "" {
		return "the repository's root"
	}
	return dir
}

// repoRoot is the repository's root, absolute, with links resolved.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(testutil.Root())
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		t.Fatal(err)
	}
	testutil.Installed(t, "git", "the repository's hygiene tests need it to read .gitignore")
	return root
}

// sameDir tells whether a and b name the same directory.
func sameDir(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// throwaway makes an empty repository and an environment in which git reads
// no configuration but its own: only the work tree's .gitignore files then
// decide what is ignored.
func throwaway(t *testing.T) (gitDir string, env []string) {
	t.Helper()
	dir := t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+dir, "XDG_CONFIG_HOME="+dir, "GIT_CONFIG_NOSYSTEM=1")
	mustGit(t, dir, env, "init", "-q", "repo")
	return filepath.Join(dir, "repo", ".git"), env
}

// gitOutput runs git in dir; env nil is this process's environment.
func gitOutput(dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

func mustGit(t *testing.T, dir string, env []string, args ...string) []byte {
	t.Helper()
	out, err := gitOutput(dir, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// split splits git's -z output.
func split(out []byte) []string {
	s := strings.TrimSuffix(string(out), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}
