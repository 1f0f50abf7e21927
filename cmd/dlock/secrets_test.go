package main

// What reaches the store, COMMAND and the terminal: no secret of the
// command line or of the store's address, and no raw control character
// of another holder's.

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dl "github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
)

// The meta text a run stores by default names the program, none of its
// arguments: a password given to COMMAND stays out of the store.
func TestRunDefaultMetaHasNoArgument(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	sig := filepath.Join(t.TempDir(), "sig")
	script := `echo x > "$0.started"; while [ ! -e "$0.go" ]; do sleep 0.02; done`
	p := start(t, url, "run", "k1", "--", "sh", "-c", script, sig, "-pS3cretPassw0rd", "--password=hunter2")
	waitFile(t, sig+".started", 10*time.Second)
	secret := func(s string) bool { return strings.Contains(s, "S3cret") || strings.Contains(s, "hunter2") }

	code, stdout, stderr := dlock(t, url, "status", "--json", "k1")
	var st lockJSON
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil {
		t.Fatalf("status --json: %d %q %v; stderr %q", code, stdout, err, stderr)
	}
	if st.Meta != "dlock run: sh" {
		t.Errorf("default meta %q, want %q", st.Meta, "dlock run: sh")
	}
	if v := rdb.Get(context.Background(), lockKey("k1")).Val(); v == "" || secret(v) {
		t.Errorf("lock value %q: want one without the command's arguments", v)
	}
	if _, stdout, _ := dlock(t, url, "list"); secret(stdout) || !strings.Contains(stdout, "dlock run: sh") {
		t.Errorf("list shows %q", stdout)
	}
	if err := writeFile(sig + ".go"); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(10 * time.Second); code != 0 {
		t.Fatalf("run: %d; stderr %q", code, p.stderr.String())
	}
}

// aclServer starts a redis-server whose only usable user is dl, password
// s3cretPW (the default user is turned off), and returns its address.
func aclServer(t *testing.T) string {
	t.Helper()
	srv := redisserver.Start(t, redisserver.WithArgs("--user", "dl", "on", ">s3cretPW", "~*", "&*", "+@all"))
	if err := srv.Client(t).Do(context.Background(), "ACL", "SETUSER", "default", "off").Err(); err != nil {
		t.Fatal(err)
	}
	return srv.Addr()
}

// writeSecret writes a password file as people do: with a newline.
func writeSecret(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// An ACL user's password comes from a file, by flag (before or after the
// command name) or by variable; it replaces a password in the URL. A run
// that exits 0 has run its command under the lock.
func TestRedisPasswordFile(t *testing.T) {
	t.Parallel()
	addr := aclServer(t)
	pw := writeSecret(t, "s3cretPW")
	url := "redis://dl@" + addr + "/0"
	if code, _, stderr := dlock(t, url, "status", "k"); code != 69 {
		t.Fatalf("without the password: status %d, want 69; stderr %q", code, stderr)
	}
	for _, tc := range []struct {
		name string
		url  string
		env  []string
		args []string
		want int // 1 for status: reached the store, the lock is free
	}{
		{"flag", url, nil, []string{"run", "--redis-password-file", pw, "k", "--", "true"}, 0},
		{"flag before the command name", url, nil, []string{"--redis-password-file", pw, "status", "k"}, 1},
		{"variable", url, []string{"DLOCK_REDIS_PASSWORD_FILE=" + pw}, []string{"run", "k", "--", "true"}, 0},
		{"variable, status", url, []string{"DLOCK_REDIS_PASSWORD_FILE=" + pw}, []string{"status", "k"}, 1},
		{"replaces the URL's", "redis://dl:wrong@" + addr + "/0", nil, []string{"run", "--redis-password-file", pw, "k", "--", "true"}, 0},
	} {
		if code, _, stderr := dlockEnv(t, tc.url, tc.env, tc.args...); code != tc.want {
			t.Errorf("%s: status %d, want %d; stderr %q", tc.name, code, tc.want, stderr)
		}
	}
	// A file that cannot be read is a usage error, naming the option.
	code, _, stderr := dlock(t, url, "status", "--redis-password-file", filepath.Join(t.TempDir(), "none"), "k")
	if code != 64 || !strings.Contains(stderr, "password_file") {
		t.Errorf("missing password file: %d %q", code, stderr)
	}
	// Another store's password file on the command line is a mistake.
	if code, _, stderr := dlock(t, url, "status", "--etcd-password-file", pw, "k"); code != 64 {
		t.Errorf("--etcd-password-file on Redis: %d %q", code, stderr)
	}
}

// COMMAND's environment has no variable that chooses or reaches a store:
// neither addresses (with their passwords) nor password files.
func TestRunCommandEnvHasNoStoreVariables(t *testing.T) {
	t.Parallel()
	addr := aclServer(t)
	pw := writeSecret(t, "s3cretPW")
	env := []string{
		"DLOCK_ETCD=etcd://dl:dlpw@127.0.0.1:1",
		"DLOCK_REDIS_PASSWORD_FILE=" + pw,
		"DLOCK_ETCD_PASSWORD_FILE=" + pw,
		"DLOCK_KEEP_ME=1", "OTHER_VAR=kept",
	}
	out := filepath.Join(t.TempDir(), "env")
	code, _, stderr := dlockEnv(t, "redis://admin:adminpw@127.0.0.1:1/0", env,
		"run", "--redis", "redis://dl@"+addr+"/0", "k", "--", "sh", "-c", "env > "+out)
	if code != 0 {
		t.Fatalf("run: %d; stderr %q", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := "\n" + string(b)
	for _, name := range []string{"DLOCK_REDIS", "DLOCK_ETCD", "DLOCK_REDIS_PASSWORD_FILE", "DLOCK_ETCD_PASSWORD_FILE"} {
		if strings.Contains(got, "\n"+name+"=") {
			t.Errorf("COMMAND's environment has %s", name)
		}
	}
	if strings.Contains(got, "adminpw") || strings.Contains(got, "dlpw") {
		t.Errorf("COMMAND's environment shows a password:\n%s", b)
	}
	for _, kept := range []string{"\nDLOCK_KEY=k\n", "\nDLOCK_KEEP_ME=1\n", "\nOTHER_VAR=kept\n"} {
		if !strings.Contains(got, kept) {
			t.Errorf("COMMAND's environment lacks %q", strings.TrimSpace(kept))
		}
	}
}

// The TLS flags reach a Redis that requires client certificates; without
// the certificate it is unreachable (69); skip_verify, and
// insecure_skip_verify without --tls-insecure-skip-verify, are usage
// errors.
func TestRedisTLS(t *testing.T) {
	t.Parallel()
	f := redisserver.NewTLSFiles(t)
	srv := redisserver.Start(t, redisserver.WithTLS(f))
	base := "rediss://" + srv.Addr() + "/0"
	q := url.QueryEscape
	withCerts := base + "?ca_file=" + q(f.CA) + "&cert_file=" + q(f.ClientCert) + "&key_file=" + q(f.ClientKey)
	flags := []string{"--tls-ca", f.CA, "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey}
	vars := []string{"DLOCK_TLS_CA=" + f.CA, "DLOCK_TLS_CERT=" + f.ClientCert, "DLOCK_TLS_KEY=" + f.ClientKey}
	for _, tc := range []struct {
		name string
		url  string
		env  []string
		args []string
		want int
		says string
	}{
		{"flags", base, nil, append(append([]string{"run"}, flags...), "k", "--", "true"), 0, ""},
		{"flags before the name", base, nil, append(flags, "status", "k"), 1, ""},
		{"variables", base, vars, []string{"run", "k", "--", "true"}, 0, ""},
		{"URL options", withCerts, nil, []string{"status", "k"}, 1, ""},
		{"no client certificate", base, nil, []string{"status", "--tls-ca", f.CA, "k"}, 69, ""},
		{"another CA", base, nil, []string{"status", "--tls-ca", f.OtherCA, "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey, "k"}, 69, ""},
		{"skip_verify", withCerts + "&skip_verify=true", nil, []string{"status", "k"}, 64, "insecure_skip_verify"},
		{"insecure_skip_verify without the flag", withCerts + "&insecure_skip_verify=true", nil, []string{"status", "k"}, 64, "--tls-insecure-skip-verify"},
		{"insecure_skip_verify with the flag", withCerts + "&insecure_skip_verify=true", nil, []string{"status", "--tls-insecure-skip-verify", "k"}, 1, ""},
		{"--tls-insecure-skip-verify", base, nil, []string{"status", "--tls-insecure-skip-verify", "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey, "k"}, 1, ""},
		{"--tls-cert without --tls-key", base, nil, []string{"status", "--tls-ca", f.CA, "--tls-cert", f.ClientCert, "k"}, 64, "key_file"},
		{"TLS flags on redis://", "redis://" + srv.Addr() + "/0", nil, []string{"status", "--tls-ca", f.CA, "k"}, 64, "TLS"},
		{"a flag and its URL option", withCerts, nil, []string{"status", "--tls-ca", f.CA, "k"}, 64, "ca_file"},
	} {
		code, _, stderr := dlockEnv(t, tc.url, tc.env, tc.args...)
		if code != tc.want || !strings.Contains(stderr, tc.says) {
			t.Errorf("%s: status %d, want %d; stderr %q (want it to name %q)", tc.name, code, tc.want, stderr, tc.says)
		}
		if code == 64 {
			oneLine(t, stderr)
		}
	}
}

// Text output quotes a key, meta or id with control characters, so no
// holder can forge a row or reach the terminal; JSON keeps them exact.
func TestTextOutputEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	const evilKey = "ev\nFORGED 1 host 1 1s 1s x\x1b[31m"
	const evilMeta = "m\nFORGED 2 host 2 2s 2s y\x1b]0;title\x07"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := redisdriver.Open(url, dl.WithOwnerMeta(evilMeta), dl.WithDefaultTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, key := range []string{evilKey, "plain"} {
		if _, err := c.TryLock(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.RWMutex("readers").TryRLock(ctx); err != nil {
		t.Fatal(err)
	}
	raw := func(s string) bool { return strings.ContainsAny(s, "\x1b\x07") || strings.Contains(s, "\nFORGED") }

	code, stdout, stderr := dlock(t, url, "list")
	if code != 0 || raw(stdout) {
		t.Fatalf("list: %d, raw control characters in %q; stderr %q", code, stdout, stderr)
	}
	// A header, two locks; a blank line, a header, one reader.
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 6 || lines[3] != "" || !strings.HasPrefix(lines[1], `"ev\nFORGED`) || !strings.HasPrefix(lines[2], "plain ") ||
		!strings.Contains(lines[1], `"m\nFORGED 2 host 2 2s 2s y\x1b]0;title\a"`) || !strings.HasPrefix(lines[5], "readers ") {
		t.Fatalf("list: want one row per lock, escaped:\n%s", stdout)
	}
	code, stdout, _ = dlock(t, url, "status", evilKey)
	if code != 0 || raw(stdout) || !fieldLine(stdout, "key:", `"ev\nFORGED`) ||
		!strings.Contains(stdout, `"m\nFORGED`) {
		t.Fatalf("status: %d:\n%s", code, stdout)
	}
	code, stdout, _ = dlock(t, url, "status", "readers")
	if code != 0 || raw(stdout) || !strings.Contains(stdout, `"m\nFORGED`) {
		t.Fatalf("status of a reader: %d:\n%s", code, stdout)
	}
	// Plain names print as they are.
	if code, stdout, _ = dlock(t, url, "status", "plain"); code != 0 || !fieldLine(stdout, "key:", "plain") {
		t.Fatalf("status plain: %d:\n%s", code, stdout)
	}
	var list []lockJSON
	_, stdout, _ = dlock(t, url, "list", "--json", "ev")
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || len(list) != 1 || list[0].Key != evilKey || list[0].Meta != evilMeta {
		t.Fatalf("list --json: %v %+v", err, list)
	}
}
