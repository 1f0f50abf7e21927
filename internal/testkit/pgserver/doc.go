// Package pgserver runs real PostgreSQL servers for tests: each Start runs
// initdb into a fresh temporary directory and starts postgres on a free
// 127.0.0.1 port (its unix socket in the same directory), with fsync off for
// speed. Stop, Kill and Restart let fault tests take the database away and
// bring it back with its data.
//
// The binaries are looked up on PATH and then in /usr/lib/postgresql/*/bin
// (the Debian layout; scripts/test installs the postgresql package when they
// are missing). PostgreSQL refuses to run as root, so when the tests run as
// root the server runs as the unprivileged "postgres" system user that the
// Debian package creates, and the directory is handed to it.
//
// A missing PostgreSQL fails the test: it is never skipped, so a machine
// without it cannot pass the suite by accident.
//
// It opens connections with database/sql's "pgx" driver, which the test
// package registers (import _ "github.com/jackc/pgx/v5/stdlib"): pgx is a
// dependency of the SQL modules only, never of the root module.
package pgserver
