package pgserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// binaries finds initdb and postgres: on PATH first, then in the newest
// /usr/lib/postgresql/VERSION/bin that has both.
func binaries() (initdb, postgres string, err error) {
	i, err1 := exec.LookPath("initdb")
	p, err2 := exec.LookPath("postgres")
	if err1 == nil && err2 == nil {
		return i, p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		i, p := filepath.Join(d, "initdb"), filepath.Join(d, "postgres")
		if isExec(i) && isExec(p) {
			return i, p, nil
		}
	}
	return "", "", errors.New("pgserver: initdb and postgres not found on PATH nor in /usr/lib/postgresql/*/bin; " +
		"install PostgreSQL (Debian: apt-get install postgresql; scripts/test does it)")
}

// version is the major version in a /usr/lib/postgresql/VERSION/bin path.
func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// account is who the server processes run as: nil (ourselves) unless we are
// root, which PostgreSQL refuses; then the "postgres" system user.
func account() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgserver: running as root, and PostgreSQL refuses to: need the unprivileged "+
			"system user \"postgres\" (the Debian package creates it): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgserver: user postgres has uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// chownTree hands dir and everything in it to cred's user.
func chownTree(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(cred.Uid), int(cred.Gid))
	})
}
