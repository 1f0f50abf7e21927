// Package redisserver provides test infrastructure for code that talks to
// Redis: a real redis-server process per test ([Server]) and an in-process
// TCP proxy for fault injection between clients and Redis ([Proxy]).
//
// Everything is tied to a testing.TB and torn down with t.Cleanup. Cleanups
// run in reverse registration order, so a test that checks for goroutine
// leaks should register the check before creating servers, proxies or
// clients, for example:
//
//	t.Cleanup(func() { goleak.VerifyNone(t) })
//	srv := redisserver.Start(t)
//	c := srv.Client(t)
//
// A deferred goleak.VerifyNone runs before any cleanup and would report the
// goroutines of still-open clients, proxies and servers.
//
// Setting the environment variable DLOCK_TEST_REDIS to host:port makes
// [Start] use that existing server (flushed with FLUSHALL) instead of
// starting one; tests that need to kill or restart the server are then
// skipped.
package redisserver
