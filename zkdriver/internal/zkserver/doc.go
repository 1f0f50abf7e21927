// Package zkserver runs real ZooKeeper servers for tests: one standalone
// node ([Start]) or an ensemble of three ([StartEnsemble]) on free
// 127.0.0.1 ports, each a java child process of the test with its own
// configuration and data directory under t.TempDir(), which a test can
// kill -9, pause (SIGSTOP), resume and restart with its data kept.
//
// Java and ZooKeeper's class path are found the way the Debian package's
// zkEnv.sh sets them: $DLOCK_ZK_CLASSPATH, else the CLASSPATH line of
// /usr/share/zookeeper/bin/zkEnv.sh, else /usr/share/java/zookeeper.jar;
// $DLOCK_ZK_JAVA, else the JAVA line of zkEnv.sh, else java on PATH.
// Without ZooKeeper the tests that need it fail, with the install command
// in the message (scripts/test installs the package).
//
// Everything is tied to a testing.TB and torn down with t.Cleanup.
package zkserver
