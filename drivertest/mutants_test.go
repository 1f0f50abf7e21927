package drivertest_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/memdriver"
)

// A mutant is memdriver with one promise broken. The suite must fail each
// one, in the subtests named, or an assertion there cannot fail.
type mutant struct {
	name     string
	subtests []string // as in -test.run: Group/Name
	make     func(d *mutated)
	// keyChecker wraps the driver in keyChecked; badKeys goes to the
	// Harness; counterLost makes restarts set tokenOffset.
	keyChecker  bool
	badKeys     []string
	counterLost bool
}

var mutants = append([]mutant{
	{name: "no exclusion", subtests: []string{"Basics/Exclusion", "Basics/ExclusionContended"}, make: func(m *mutated) {
		m.acquire = func(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
			res, err := m.Driver.Acquire(ctx, req)
			return driver.AcquireResult{Acquired: err == nil, Token: res.Token}, err
		}
	}},
	{name: "constant token", subtests: []string{"Tokens/Release", "Tokens/Expiry", "Retry/Acquire"}, make: func(m *mutated) {
		m.acquire = func(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
			res, err := m.Driver.Acquire(ctx, req)
			if res.Acquired {
				res.Token = 7
			}
			return res, err
		}
	}},
	{name: "early expiry", subtests: []string{"Tokens/Expiry"}, make: func(m *mutated) {
		m.acquire = func(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
			req.TTL = (req.TTL / 2).Truncate(time.Millisecond)
			return m.Driver.Acquire(ctx, req)
		}
	}},
	{name: "retried acquire refused", subtests: []string{"Retry/Acquire"}, make: func(m *mutated) {
		var seen sync.Map
		m.acquire = func(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
			if _, again := seen.LoadOrStore(req.Key+"\x00"+req.ID, true); again {
				return driver.AcquireResult{RetryAfter: req.TTL}, nil
			}
			return m.Driver.Acquire(ctx, req)
		}
	}},
	{name: "ctx ignored", subtests: []string{"Basics/Context"}, make: func(m *mutated) {
		m.acquire = func(_ context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
			return m.Driver.Acquire(context.Background(), req)
		}
	}},
	{name: "no AlreadyReleased", subtests: []string{"Retry/Release", "Retry/ReleaseBatch"}, make: func(m *mutated) {
		m.release = mapRelease(m, func(r driver.ReleaseResult) driver.ReleaseResult {
			if r == driver.AlreadyReleased {
				return driver.NotHeld
			}
			return r
		})
	}},
	{name: "stranger releases", subtests: []string{"Retry/Stranger"}, make: func(m *mutated) {
		m.release = func(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
			res, err := m.Driver.Release(ctx, reqs)
			for i := range res {
				if res[i] == driver.NotHeld {
					if _, ok, _ := m.Driver.ForceRelease(ctx, reqs[i].Key); ok {
						res[i] = driver.Released
					}
				}
			}
			return res, err
		}
	}},
	{name: "batch results reversed", subtests: []string{"Retry/ReleaseBatch"}, make: func(m *mutated) {
		m.release = func(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
			res, err := m.Driver.Release(ctx, reqs)
			for i, j := 0, len(res)-1; i < j; i, j = i+1, j-1 {
				res[i], res[j] = res[j], res[i]
			}
			return res, err
		}
	}},
	{name: "renewal always true", subtests: []string{"Renew/NotHeld"}, make: func(m *mutated) {
		m.renew = func(ctx context.Context, reqs []driver.RenewRequest) ([]bool, error) {
			held, err := m.Driver.Renew(ctx, reqs)
			for i := range held {
				held[i] = true
			}
			return held, err
		}
	}},
	{name: "renewal does not extend", subtests: []string{"Renew/Extends"}, make: func(m *mutated) {
		m.renew = func(ctx context.Context, reqs []driver.RenewRequest) ([]bool, error) {
			short := make([]driver.RenewRequest, len(reqs))
			for i, r := range reqs {
				r.TTL = time.Millisecond
				short[i] = r
			}
			return m.Driver.Renew(ctx, short)
		}
	}},
	{name: "empty renewal fails", subtests: []string{"Renew/Empty"}, make: func(m *mutated) {
		m.renew = func(ctx context.Context, reqs []driver.RenewRequest) ([]bool, error) {
			if len(reqs) == 0 {
				return nil, errors.New("empty batch")
			}
			return m.Driver.Renew(ctx, reqs)
		}
	}},
	{name: "deaf watcher", subtests: []string{"Watch/Release", "Watch/ForceRelease"}, make: func(m *mutated) {
		m.watch = func(func(string)) (driver.Watcher, error) { return m.Driver.Watch(func(string) {}) }
	}},
	{name: "concurrent callbacks", subtests: []string{"Watch/SlowCallback"}, make: func(m *mutated) {
		m.watch = func(f func(string)) (driver.Watcher, error) {
			return m.Driver.Watch(func(key string) { go f(key) })
		}
	}},
	{name: "nil callback accepted", subtests: []string{"Watch/Nil"}, make: func(m *mutated) {
		m.watch = func(f func(string)) (driver.Watcher, error) {
			if f == nil {
				f = func(string) {}
			}
			return m.Driver.Watch(f)
		}
	}},
	{name: "Remove ignored", subtests: []string{"Watch/Remove"}, make: func(m *mutated) {
		m.watch = func(f func(string)) (driver.Watcher, error) {
			w, err := m.Driver.Watch(f)
			return sticky{w}, err
		}
	}},
	{name: "Close ignored", subtests: []string{"Watch/Close"}, make: func(m *mutated) {
		var mu sync.Mutex
		var open []driver.Watcher
		m.watch = func(f func(string)) (driver.Watcher, error) {
			w, err := m.Driver.Watch(f)
			if err == nil {
				mu.Lock()
				open = append(open, w)
				mu.Unlock()
			}
			return unclosable{w}, err
		}
		m.close = func() error { // the watchers' goroutines go with the driver
			mu.Lock()
			defer mu.Unlock()
			for _, w := range open {
				w.Close()
			}
			return m.Driver.Close()
		}
	}},
	{name: "zero MaxBatch", subtests: []string{"Basics/Capabilities"}, make: func(m *mutated) {
		m.caps = func() driver.Capabilities { c := m.Driver.Capabilities(); c.MaxBatch = 0; return c }
	}},
	{name: "anonymous owner", subtests: []string{"Inspector/Inspect", "Inspector/List"}, make: func(m *mutated) {
		m.inspect = func(ctx context.Context, key string) (driver.LockInfo, bool, error) {
			info, ok, err := m.Driver.Inspect(ctx, key)
			info.Owner = driver.Owner{}
			return info, ok, err
		}
		m.list = func(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
			infos, err := m.Driver.List(ctx, prefix)
			for i := range infos {
				infos[i].Owner = driver.Owner{}
			}
			return infos, err
		}
	}},
	{name: "List ignores prefix", subtests: []string{"Inspector/List"}, make: func(m *mutated) {
		m.list = func(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
			return m.Driver.List(ctx, "")
		}
	}},
	{name: "ForceRelease token off", subtests: []string{"Inspector/ForceRelease"}, make: func(m *mutated) {
		m.forceRelease = func(ctx context.Context, key string) (uint64, bool, error) {
			token, ok, err := m.Driver.ForceRelease(ctx, key)
			return token + 1, ok, err
		}
	}},
	{name: "counter lost on restart", subtests: []string{"Tokens/RestartEmpty", "Tokens/RestartFromSnapshot"}, counterLost: true,
		make: func(m *mutated) {
			m.acquire = func(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
				res, err := m.Driver.Acquire(ctx, req)
				if res.Acquired {
					res.Token -= m.tokenOffset.Load()
				}
				return res, err
			}
		}},
	{name: "CheckKey errors not ErrInvalid", subtests: []string{"Basics/Keys", "Basics/KeyChecker"},
		keyChecker: true, badKeys: []string{"has space"}, make: func(*mutated) {}},
	{name: "BadKeys without KeyChecker", subtests: []string{"Basics/KeyChecker"},
		badKeys: []string{"anything"}, make: func(*mutated) {}},
}, queueMutants...)

func mapRelease(m *mutated, f func(driver.ReleaseResult) driver.ReleaseResult) func(context.Context, []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
	return func(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
		res, err := m.Driver.Release(ctx, reqs)
		for i := range res {
			res[i] = f(res[i])
		}
		return res, err
	}
}

// mutated is a memdriver handle whose methods can be replaced one by one.
type mutated struct {
	*memdriver.Driver
	acquire      func(context.Context, driver.AcquireRequest) (driver.AcquireResult, error)
	release      func(context.Context, []driver.ReleaseRequest) ([]driver.ReleaseResult, error)
	renew        func(context.Context, []driver.RenewRequest) ([]bool, error)
	watch        func(func(string)) (driver.Watcher, error)
	close        func() error
	caps         func() driver.Capabilities
	inspect      func(context.Context, string) (driver.LockInfo, bool, error)
	list         func(context.Context, string) ([]driver.LockInfo, error)
	forceRelease func(context.Context, string) (uint64, bool, error)
	acquireAll   func(context.Context, []driver.AcquireRequest) (driver.AcquireAllResult, error)
	enqueue      func(context.Context, driver.QueueRequest) (driver.QueueResult, error)
	// tokenOffset is subtracted by the "counter lost" mutant: the harness
	// sets it on restarts so that tokens fall back to what the restored
	// state had issued.
	tokenOffset atomic.Uint64
}

func (m *mutated) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
	if m.acquire != nil {
		return m.acquire(ctx, req)
	}
	return m.Driver.Acquire(ctx, req)
}

func (m *mutated) AcquireAll(ctx context.Context, reqs []driver.AcquireRequest) (driver.AcquireAllResult, error) {
	if m.acquireAll != nil {
		return m.acquireAll(ctx, reqs)
	}
	return m.Driver.AcquireAll(ctx, reqs)
}

func (m *mutated) Release(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
	if m.release != nil {
		return m.release(ctx, reqs)
	}
	return m.Driver.Release(ctx, reqs)
}

func (m *mutated) Enqueue(ctx context.Context, req driver.QueueRequest) (driver.QueueResult, error) {
	if m.enqueue != nil {
		return m.enqueue(ctx, req)
	}
	return m.Driver.Enqueue(ctx, req)
}

func (m *mutated) Renew(ctx context.Context, reqs []driver.RenewRequest) ([]bool, error) {
	if m.renew != nil {
		return m.renew(ctx, reqs)
	}
	return m.Driver.Renew(ctx, reqs)
}

func (m *mutated) Watch(f func(string)) (driver.Watcher, error) {
	if m.watch != nil {
		return m.watch(f)
	}
	return m.Driver.Watch(f)
}

func (m *mutated) Close() error {
	if m.close != nil {
		return m.close()
	}
	return m.Driver.Close()
}

func (m *mutated) Capabilities() driver.Capabilities {
	if m.caps != nil {
		return m.caps()
	}
	return m.Driver.Capabilities()
}

func (m *mutated) Inspect(ctx context.Context, key string) (driver.LockInfo, bool, error) {
	if m.inspect != nil {
		return m.inspect(ctx, key)
	}
	return m.Driver.Inspect(ctx, key)
}

func (m *mutated) List(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
	if m.list != nil {
		return m.list(ctx, prefix)
	}
	return m.Driver.List(ctx, prefix)
}

func (m *mutated) ForceRelease(ctx context.Context, key string) (uint64, bool, error) {
	if m.forceRelease != nil {
		return m.forceRelease(ctx, key)
	}
	return m.Driver.ForceRelease(ctx, key)
}

type sticky struct{ driver.Watcher }

func (sticky) Remove(context.Context, string) error { return nil }

type unclosable struct{ driver.Watcher }

func (unclosable) Close() error { return nil }

// keyChecked adds a KeyChecker whose errors do not match driver.ErrInvalid.
type keyChecked struct{ *mutated }

func (keyChecked) CheckKey(key string) error {
	for _, r := range key {
		if r == ' ' {
			return errors.New("no spaces")
		}
	}
	return nil
}
