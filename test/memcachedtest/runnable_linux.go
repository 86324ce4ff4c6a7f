package memcachedtest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// runnable is bin, or, when the user attr runs memcached as may not
// execute it (a checkout
// in a directory only root enters, as /root is), a copy of it that user
// may: memcached is executed as that user, no longer as root changing
// user afterwards. The copy is in the machine's temporary directory,
// named after its content, so that test binaries and runs share it.
func runnable(bin string, attr *syscall.SysProcAttr) (string, error) {
	cred := attr.Credential
	if cred == nil || canExec(bin, cred.Uid, cred.Gid) {
		return bin, nil
	}
	copies.Lock()
	defer copies.Unlock()
	if path, ok := copies.of[bin]; ok {
		return path, nil
	}
	path, err := copyFor(bin, cred)
	if err != nil {
		return "", fmt.Errorf("%s cannot be run as uid %d, nor copied where it can: %v", bin, cred.Uid, err)
	}
	copies.of[bin] = path
	return path, nil
}

var copies = struct {
	sync.Mutex
	of map[string]string
}{of: map[string]string{}}

// canExec tells whether uid (in group gid) may search every directory on
// the way to path and execute path, by their permission bits.
func canExec(path string, uid, gid uint32) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return false
	}
	for p := abs; ; p = filepath.Dir(p) {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) != nil {
			return false
		}
		mode := uint32(st.Mode)
		switch {
		case st.Uid == uid && mode&0o100 != 0:
		case st.Uid != uid && st.Gid == gid && mode&0o010 != 0:
		case st.Uid != uid && st.Gid != gid && mode&0o001 != 0:
		default:
			return false
		}
		if p == filepath.Dir(p) {
			return true
		}
	}
}

// copyFor copies bin to TMPDIR/memcachedtest/memcached-HASH, readable and
// executable by all, unless a copy of that content is there already.
func copyFor(bin string, cred *syscall.Credential) (string, error) {
	f, err := os.Open(bin)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), "memcachedtest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "memcached-"+hex.EncodeToString(h.Sum(nil))[:16])
	if canExec(path, cred.Uid, cred.Gid) {
		return path, nil
	}
	tmp, err := os.CreateTemp(dir, ".memcached-")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if _, err := io.Copy(tmp, f); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	if !canExec(path, cred.Uid, cred.Gid) {
		return "", fmt.Errorf("uid %d cannot execute %s either", cred.Uid, path)
	}
	return path, nil
}
