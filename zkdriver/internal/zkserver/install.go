package zkserver

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// debianEnv is the Debian package's environment script: it names the java
// binary and the class path zkServer.sh runs the server with.
const debianEnv = "/usr/share/zookeeper/bin/zkEnv.sh"

// debianJar is the server's jar in the Debian package, whose manifest
// names the jars it needs.
const debianJar = "/usr/share/java/zookeeper.jar"

const installHint = "install the Debian package zookeeper (apt-get install zookeeper), or set DLOCK_ZK_CLASSPATH and DLOCK_ZK_JAVA"

// installation is how to run a ZooKeeper server on this machine.
type installation struct {
	java      string
	classpath string
}

// findInstallation locates java and ZooKeeper's class path, or says what
// is missing.
func findInstallation() (installation, error) {
	vars := readEnvScript(debianEnv)
	in := installation{java: os.Getenv("DLOCK_ZK_JAVA"), classpath: os.Getenv("DLOCK_ZK_CLASSPATH")}
	if in.classpath == "" {
		in.classpath = jarsOnly(vars["CLASSPATH"])
	}
	if in.classpath == "" {
		in.classpath = debianJar
	}
	for _, p := range filepath.SplitList(in.classpath) {
		if _, err := os.Stat(p); err != nil {
			return in, fmt.Errorf("zkserver: ZooKeeper's class path entry %s is missing (%v): %s", p, err, installHint)
		}
	}
	if in.java == "" {
		in.java = vars["JAVA"]
	}
	if in.java == "" {
		in.java = "java"
	}
	java, err := exec.LookPath(in.java)
	if err != nil {
		return in, fmt.Errorf("zkserver: no java (%v): %s", err, installHint)
	}
	in.java = java
	return in, nil
}

// readEnvScript reads the NAME=value lines of a shell script that only
// sets variables, such as zkEnv.sh; quotes are dropped, nothing is
// expanded. A missing script reads as no variables.
func readEnvScript(path string) map[string]string {
	vars := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return vars
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, value, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") || strings.ContainsAny(name, " \t$") {
			continue
		}
		vars[name] = strings.Trim(value, `"'`)
	}
	return vars
}

// jarsOnly keeps the jar entries of a class path: the package's
// configuration directory would give the server its logging setup and
// zoo.cfg's neighbours, which a test's server must not read.
func jarsOnly(cp string) string {
	var jars []string
	for _, p := range filepath.SplitList(cp) {
		if strings.HasSuffix(p, ".jar") || strings.HasSuffix(p, "*") {
			jars = append(jars, p)
		}
	}
	return strings.Join(jars, string(filepath.ListSeparator))
}

var errNotServing = errors.New("not serving")
