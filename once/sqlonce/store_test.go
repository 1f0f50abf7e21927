package sqlonce_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/pgserver"
	"github.com/dlockio/dlock/once"
	"github.com/dlockio/dlock/once/oncetest"
	"github.com/dlockio/dlock/once/sqlonce"
)

// The suite against a real PostgreSQL, killed (SIGKILL) and restarted once.
func TestConformance(t *testing.T) {
	srv := pgserver.Start(t)
	db := srv.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sqlonce.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := sqlonce.Migrate(ctx, db); err != nil {
		t.Fatalf("second migration: %v", err)
	}
	oncetest.Run(t, oncetest.Harness{
		New: func(t *testing.T) once.Store {
			s, err := sqlonce.New(db)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Restart: func(t *testing.T) {
			srv.Kill(t)
			srv.Restart(t)
		},
	})
}

// A key PostgreSQL text cannot store (a NUL byte, invalid UTF-8) is bad
// input, not a store failure. Before, it came back as ErrBackend.
func TestKeyPostgreSQLCannotStore(t *testing.T) {
	db := pgserver.Start(t).Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sqlonce.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	s, err := sqlonce.New(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a\x00b", "job:\xff"} {
		if _, _, err := s.Claim(ctx, k, 1, []byte("h"), time.Minute); !errors.Is(err, once.ErrInvalidArgument) || errors.Is(err, dlock.ErrBackend) {
			t.Errorf("Claim of key %q: %v, want ErrInvalidArgument", k, err)
		}
		if _, _, err := s.Get(ctx, k); !errors.Is(err, once.ErrInvalidArgument) {
			t.Errorf("Get of key %q: %v, want ErrInvalidArgument", k, err)
		}
	}
}
