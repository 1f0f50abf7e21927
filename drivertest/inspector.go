package drivertest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// testInspect: a held lock shows its holder's token, owner, acquisition
// time and remaining TTL; a free one is not found.
func testInspect(t *testing.T, h Harness) {
	e := newEnv(t, h)
	in := e.inspector()
	k := e.key("lock")
	ttl := e.ttl(longTTL)
	before := time.Now()
	l := e.acquire(k, ttl)
	after := time.Now()

	info, ok, err := in.Inspect(e.ctx, k)
	if err != nil || !ok {
		t.Fatalf("Inspect of a held lock: ok %v, err %v", ok, err)
	}
	e.checkInfo(info, l, ttl)
	// Since is by a clock that may count whole milliseconds or seconds;
	// a second either side still catches a missing or made-up time.
	if info.Since.Before(before.Add(-time.Second)) || info.Since.After(after.Add(time.Second)) {
		t.Errorf("Inspect: Since = %v, want within a second of [%v, %v]", info.Since, before, after)
	}

	for _, key := range []string{e.key("never"), k} {
		if key == k {
			e.releaseOne(l, driver.Released)
		}
		if info, ok, err := in.Inspect(e.ctx, key); err != nil || ok {
			t.Errorf("Inspect(%q) of a free lock = %+v, ok %v, err %v; want ok false", key, info, ok, err)
		}
	}
}

// checkInfo checks what an Inspector reports of l, acquired with ttl.
func (e *env) checkInfo(info driver.LockInfo, l lease, ttl time.Duration) {
	e.t.Helper()
	if info.Key != l.key || info.Token != l.token || info.Owner != e.owner() {
		e.t.Errorf("lock info = key %q, token %d, owner %+v; want %q, %d, %+v",
			info.Key, info.Token, info.Owner, l.key, l.token, e.owner())
	}
	if info.TTL <= 0 || info.TTL > ttl {
		e.t.Errorf("lock info of %q: TTL = %v, want in (0, %v]", l.key, info.TTL, ttl)
	}
}

// testList: List returns exactly the held locks under a prefix, taking
// the prefix literally (no glob or pattern characters) and as bytes.
func testList(t *testing.T, h Harness) {
	e := newEnv(t, h)
	in := e.inspector()
	ttl := e.ttl(longTTL)
	p := e.key("p/")
	a := e.acquire(p+"a", ttl)
	b := e.acquire(p+"b", ttl)
	glob := e.acquire(p+"[x]*", ttl)
	bin := e.acquire(p+"\xffz", ttl) // not UTF-8: names are bytes
	other := e.acquire(e.key("q"), ttl)
	e.releaseOne(e.acquire(p+"gone", ttl), driver.Released)
	e.acquire(e.key("p"), ttl) // the prefix without its slash: not under it

	for _, c := range []struct {
		prefix string
		want   []lease
	}{
		{p, []lease{a, b, glob, bin}},
		{p + "[", []lease{glob}},
		{p + "\xff", []lease{bin}},
		{p + "*", nil},
		{e.key("q"), []lease{other}},
		{e.key("nothing/"), nil},
	} {
		infos, err := in.List(e.ctx, c.prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", c.prefix, err)
		}
		slices.SortFunc(infos, func(x, y driver.LockInfo) int { return strings.Compare(x.Key, y.Key) })
		got := make([]string, len(infos))
		for i, info := range infos {
			got[i] = info.Key
		}
		want := make([]string, len(c.want))
		for i, l := range c.want {
			want[i] = l.key
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", c.prefix, got, want)
			continue
		}
		for _, info := range infos {
			i := slices.IndexFunc(c.want, func(l lease) bool { return l.key == info.Key })
			e.checkInfo(info, c.want[i], ttl)
		}
	}
}

// testForceRelease: ForceRelease breaks a held lock and returns its
// holder's token; the holder can then neither release nor renew it; a free
// lock is reported not found.
func testForceRelease(t *testing.T, h Harness) {
	e := newEnv(t, h)
	in := e.inspector()
	k := e.key("lock")
	ttl := e.ttl(longTTL)
	l := e.acquire(k, ttl)
	token, ok, err := in.ForceRelease(e.ctx, k)
	if err != nil || !ok || token != l.token {
		t.Fatalf("ForceRelease of a held lock = token %d, ok %v, err %v; want the holder's token %d", token, ok, err, l.token)
	}
	if _, ok, err := in.Inspect(e.ctx, k); err != nil || ok {
		t.Errorf("Inspect after ForceRelease: ok %v, err %v; want ok false", ok, err)
	}
	if e.held(l, ttl) {
		t.Error("Renew by the broken holder: true, want false")
	}
	e.releaseOne(l, driver.NotHeld)
	if token, ok, err := in.ForceRelease(e.ctx, k); err != nil || ok {
		t.Errorf("ForceRelease of a free lock = token %d, ok %v, err %v; want ok false", token, ok, err)
	}
	if next := e.acquire(k, ttl); next.token <= l.token {
		t.Errorf("token after ForceRelease = %d, want greater than %d", next.token, l.token)
	}
}
