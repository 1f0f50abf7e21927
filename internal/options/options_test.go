package options

import (
	"errors"
	"testing"

	"github.com/dlockio/dlock/driver"
)

type option func(*[]int) error

func add(n int) option {
	return func(s *[]int) error { *s = append(*s, n); return nil }
}

func TestApply(t *testing.T) {
	var got []int
	if err := Apply(&got, []option{add(1), add(2)}); err != nil || len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("Apply: %v, %v; want [1 2] in order", got, err)
	}
	if err := Apply(&got, []option{add(3), nil, add(4)}); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("nil option: %v, want driver.ErrInvalid", err)
	}
	if len(got) != 3 {
		t.Errorf("options after the nil one ran: %v", got)
	}
	bad := errors.New("bad")
	fail := option(func(*[]int) error { return bad })
	if err := Apply(&got, []option{fail, add(5)}); err != bad {
		t.Fatalf("failing option: %v, want it as is", err)
	}
	if len(got) != 3 {
		t.Errorf("options after the failing one ran: %v", got)
	}
}
