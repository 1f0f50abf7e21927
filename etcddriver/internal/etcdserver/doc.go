// Package etcdserver runs real etcd members for tests: a single member
// ([Start]) or a cluster ([StartCluster]) on free 127.0.0.1 ports, each a
// child process of the test with its own data directory, which a test can
// kill -9, pause (SIGSTOP), resume and restart with its data kept.
//
// The etcd binary is found as $DLOCK_ETCD_BIN or "etcd" on PATH (the
// Debian package etcd-server; scripts/test installs it). Without one the
// tests that need it fail, with the install command in the message.
//
// Everything is tied to a testing.TB and torn down with t.Cleanup.
package etcdserver
