package redisdriver

import (
	"github.com/dlockio/dlock"
	"github.com/redis/go-redis/v9"
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

// OpenQuorum is Open for a quorum of independent masters (see Quorum): it
// makes a Redis client for each url (standalone servers; see ParseURL), a
// Quorum that owns them, and a dlock Client on it. Closing the Client
// closes the Redis clients too. No urls, or a url of a Cluster, is an
// error matching dlock.ErrInvalidArgument. Like Open it does not connect.
func OpenQuorum(urls []string, opts ...dlock.Option) (*dlock.Client, error) {
	clients := make([]redis.UniversalClient, 0, len(urls))
	closeAll := func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
	for _, u := range urls {
		rdb, err := ParseURL(u)
		if err != nil {
			closeAll()
			return nil, err
		}
		clients = append(clients, rdb)
	}
	q, err := NewQuorum(clients)
	if err != nil {
		closeAll()
		return nil, err
	}
	q.ownsConns = true
	c, err := dlock.New(q, opts...)
	if err != nil {
		_ = q.Close()
		return nil, err
	}
	return c, nil
}
