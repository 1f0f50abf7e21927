package cli

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The password-file and TLS flags reach the chosen store as options of
// its spec, by flag before or after the command name or by variable;
// mistakes are usage errors and nothing is opened.
func TestConnectionFlagsAddToTheStoresSpec(t *testing.T) {
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		want string // the spec opened; "" for not opened
		code int
		says string
	}{
		{"password file", nil, []string{"status", "--mem", "a", "--mem-password-file", "/run/pw", "k"}, "a?password_file=%2Frun%2Fpw", ExitNotHeld, ""},
		{"before the command name", nil, []string{"--mem", "a", "--mem-password-file", "/run/pw", "list"}, "a?password_file=%2Frun%2Fpw", ExitOK, ""},
		{"variable", map[string]string{"DLOCK_MEM": "a", "DLOCK_MEM_PASSWORD_FILE": "/p"}, []string{"list"}, "a?password_file=%2Fp", ExitOK, ""},
		{"the flag wins over the variable", map[string]string{"DLOCK_MEM_PASSWORD_FILE": "/env"}, []string{"--mem-password-file", "/flag", "list", "--mem", "a"}, "a?password_file=%2Fflag", ExitOK, ""},
		{"after the last endpoint", nil, []string{"list", "--mem", "etcds://h1:2379,h2:2379", "--tls-ca", "/ca.pem", "--tls-cert", "/c.pem", "--tls-key", "/k.pem"},
			"etcds://h1:2379,h2:2379?ca_file=%2Fca.pem&cert_file=%2Fc.pem&key_file=%2Fk.pem", ExitOK, ""},
		{"after the spec's own options", map[string]string{"DLOCK_TLS_CA": "/my ca.pem"}, []string{"list", "--mem", "a?x=1"}, "a?x=1&ca_file=%2Fmy+ca.pem", ExitOK, ""},
		{"insecure", nil, []string{"list", "--mem", "a", "--tls-insecure-skip-verify"}, "a?insecure_skip_verify=true", ExitOK, ""},
		{"insecure by variable", map[string]string{"DLOCK_TLS_INSECURE_SKIP_VERIFY": "1"}, []string{"list", "--mem", "a?insecure_skip_verify=true"}, "a?insecure_skip_verify=true", ExitOK, ""},
		{"insecure in the spec without the flag", nil, []string{"list", "--mem", "a?insecure_skip_verify=true"}, "", ExitUsage, "--tls-insecure-skip-verify"},
		{"insecure=false in the spec", nil, []string{"list", "--mem", "a?insecure_skip_verify=false"}, "a?insecure_skip_verify=false", ExitOK, ""},
		{"bad insecure variable", map[string]string{"DLOCK_TLS_INSECURE_SKIP_VERIFY": "sure"}, []string{"list", "--mem", "a"}, "", ExitUsage, "DLOCK_TLS_INSECURE_SKIP_VERIFY"},
		{"a flag and the same option", nil, []string{"list", "--mem", "a?ca_file=/x", "--tls-ca", "/y"}, "", ExitUsage, "ca_file"},
		{"a variable and the same option", map[string]string{"DLOCK_MEM_PASSWORD_FILE": "/p"}, []string{"list", "--mem", "a?password_file=/q"}, "", ExitUsage, "DLOCK_MEM_PASSWORD_FILE"},
		{"another store's password file", nil, []string{"list", "--mem", "a", "--redis-password-file", "/p"}, "", ExitUsage, "--redis-password-file"},
		{"another store's variable is ignored", map[string]string{"DLOCK_REDIS_PASSWORD_FILE": "/p"}, []string{"list", "--mem", "a"}, "a", ExitOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemBackend(t)
			code, _, stderr := runWith(Options{Backends: []Backend{m.backend()}}, tc.vars, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.says) {
				t.Fatalf("status %d, want %d; stderr %q (want it to name %q)", code, tc.code, stderr, tc.says)
			}
			got := m.opened()
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("opened %q, want not opened", got)
			case tc.want != "" && (len(got) != 1 || got[0] != tc.want):
				t.Errorf("opened %q, want [%q]", got, tc.want)
			}
			if code == ExitUsage && strings.Count(stderr, "\n") != 1 {
				t.Errorf("want one line on stderr, got %q", stderr)
			}
		})
	}
}

// COMMAND inherits no variable that chooses or reaches a store, of any
// store the binary has; the others it does.
func TestWithoutStoreVariables(t *testing.T) {
	s := &invocation{stores: newStores([]Backend{{Flag: "etcd"}}, nil), tls: newTLSFlags(nil)}
	environ := []string{"DLOCK_REDIS=redis://u:pw@h", "DLOCK_ETCD=etcd://u:pw@h", "DLOCK_REDIS_PASSWORD_FILE=/p",
		"DLOCK_ETCD_PASSWORD_FILE=/p", "DLOCK_TLS_CA=/ca", "DLOCK_TLS_CERT=/c", "DLOCK_TLS_KEY=/k",
		"DLOCK_TLS_INSECURE_SKIP_VERIFY=1", "DLOCK_TTL=1m", "DLOCK_REDISX=1", "PATH=/bin"}
	got := withoutVariables(environ, s.storeVariables())
	if want := []string{"DLOCK_TTL=1m", "DLOCK_REDISX=1", "PATH=/bin"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("COMMAND's environment %q, want %q", got, want)
	}
}

// The default meta text is the program's base name, no argument.
func TestDefaultMetaHasNoArgument(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"/usr/local/bin/backup", "--password=hunter2"}, "dlock run: backup"},
		{[]string{"sh", "-c", "mysqldump -pS3cret"}, "dlock run: sh"},
		{[]string{"./report.sh"}, "dlock run: report.sh"},
	} {
		if got := defaultMeta(tc.argv); got != tc.want {
			t.Errorf("defaultMeta(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
	// Cut between runes: the prefix makes byte 197 fall inside an "é".
	long := defaultMeta([]string{"x" + strings.Repeat("é", 150)})
	if len(long) > maxDefaultMeta || !utf8.ValidString(long) || !strings.HasSuffix(long, "é...") {
		t.Errorf("long program name: %q (%d bytes)", long, len(long))
	}
}

func TestShown(t *testing.T) {
	for in, want := range map[string]string{
		"jobs/nightly":      "jobs/nightly",
		"dlock run: make":   "dlock run: make",
		"café ☕":            "café ☕",
		"":                  "",
		"a\nb":              `"a\nb"`,
		"red\x1b[31m":       `"red\x1b[31m"`,
		"tab\there":         `"tab\there"`,
		"\"quoted\"":        `"\"quoted\""`,
		"bad\xffutf8":       `"bad\xffutf8"`,
		"rtl\u202eoverride": `"rtl\u202eoverride"`,
	} {
		if got := shown(in); got != want {
			t.Errorf("shown(%q) = %s, want %s", in, got, want)
		}
	}
}
