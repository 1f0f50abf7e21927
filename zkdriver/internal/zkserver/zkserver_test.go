package zkserver

import (
	"testing"
	"time"
)

func TestEnsembleElectsALeader(t *testing.T) {
	e := StartEnsemble(t, 3)
	l, err := e.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	followers := 0
	for _, nd := range e.Nodes {
		if m, err := nd.Mode(); err == nil && m == "follower" {
			followers++
		}
	}
	if followers != 2 {
		t.Fatalf("%d followers beside leader %d, want 2", followers, l.ID())
	}
	l.Kill()
	if nl, err := e.Leader(20 * time.Second); err != nil || nl == l {
		t.Fatalf("after killing leader %d: new leader %v, %v", l.ID(), nl, err)
	}
	l.Restart()
	if m, err := l.Mode(); err != nil || m != "follower" {
		t.Fatalf("restarted node: mode %q, %v; want follower", m, err)
	}
}

func TestStandalone(t *testing.T) {
	n := Start(t)
	if m, err := n.Mode(); err != nil || m != "standalone" {
		t.Fatalf("mode %q, %v", m, err)
	}
}
