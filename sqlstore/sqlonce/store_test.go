package sqlonce_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockio/dlock/once"
	"github.com/dlockio/dlock/once/oncetest"
	"github.com/dlockio/dlock/sqlstore/internal/pgtest"
	"github.com/dlockio/dlock/sqlstore/sqlonce"
)

// The suite against a real PostgreSQL, killed (SIGKILL) and restarted once.
func TestConformance(t *testing.T) {
	srv := pgtest.Start(t)
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
