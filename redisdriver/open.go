package redisdriver

import (
	"github.com/dlockio/dlock"
)

// Open is the one-call setup: it makes a Redis client for url (see
// ParseURL for the forms), a Driver that owns it, and a dlock Client on
// that driver. Closing the Client closes the Redis client too.
//
// Like database/sql.Open it does not connect: an unreachable server shows
// in the first call, which fails promptly for a refused connection (see
// ParseURL). Drivers with Options, or clients built by the
// application, go through New and dlock.New instead.
func Open(url string, opts ...dlock.Option) (*dlock.Client, error) {
	rdb, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	d, err := New(rdb)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	d.ownsClient = true
	c, err := dlock.New(d, opts...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return c, nil
}
