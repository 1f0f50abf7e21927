package etcddriver

import (
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// holderCmp holds, in etcd, for exactly the holder values encode writes
// for that id and mode, whatever bytes the id has (encoding/json escapes
// some of them).
func TestHolderCmpMatchesEncode(t *testing.T) {
	m := member(t)
	cli := etcdserver.Client(t, m.Addr())
	ctx := ctxT(t)
	modes := []driver.Mode{driver.ModeShared, driver.ModePermit}
	for _, id := range []string{"0123abcd", `a"b\c`, "<&>", "é", "a!"} {
		for _, mode := range modes {
			v, err := queueValue{ID: id, Mode: mode, Limit: 2, TTL: time.Second, Since: time.Now()}.encode()
			if err != nil {
				t.Fatal(err)
			}
			key := t.Name() + "/" + id
			if _, err := cli.Put(ctx, key, v); err != nil {
				t.Fatal(err)
			}
			for _, other := range modes {
				for _, asked := range []string{id, id + "x", "a"} {
					resp, err := cli.Txn(ctx).If(holderCmp(key, asked, other)...).Commit()
					if err != nil {
						t.Fatal(err)
					}
					if want := asked == id && other == mode; resp.Succeeded != want {
						t.Errorf("holderCmp(%q, %v) on the value of %q, %v: %v, want %v", asked, other, id, mode, resp.Succeeded, want)
					}
				}
			}
		}
	}
}

// A reader's or permit holder's release in one Txn acts only on a holder
// of its own id and kind: of another kind it is NotHeld and changes
// nothing; a retry after it is AlreadyReleased.
func TestHolderReleaseChecksItsKind(t *testing.T) {
	m := member(t)
	d := newDriver(t, etcdserver.Client(t, m.Addr()))
	ctx := ctxT(t)
	res, err := d.Enqueue(ctx, driver.QueueRequest{Key: "r", ID: "reader1", TTL: 10 * time.Second, Mode: driver.ModeShared})
	if err != nil || !res.Granted {
		t.Fatalf("Enqueue of a reader on a free name: %+v, %v", res, err)
	}
	release := func(k driver.Kind) driver.ReleaseResult {
		got, err := d.Release(ctx, []driver.ReleaseRequest{{Kind: k, Key: "r", ID: "reader1"}})
		if err != nil {
			t.Fatal(err)
		}
		return got[0]
	}
	if got := release(driver.KindPermit); got != driver.NotHeld {
		t.Errorf("a reader released as a permit: %v, want NotHeld", got)
	}
	if resp, err := d.cli.Get(ctx, d.holderKey("r", "reader1"), clientv3.WithCountOnly()); err != nil || resp.Count != 1 {
		t.Fatalf("the reader after a release of the wrong kind: %v, %v; want it held", resp, err)
	}
	if got := release(driver.KindRead); got != driver.Released {
		t.Errorf("a reader's release: %v, want Released", got)
	}
	if got := release(driver.KindRead); got != driver.AlreadyReleased {
		t.Errorf("the retry of a reader's release: %v, want AlreadyReleased", got)
	}
}
