package etcdserver

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// User is an etcd user for EnableAuth.
type User struct {
	Name, Password string
}

// EnableAuth turns authentication on in m, a plain (not TLS) member: it
// creates the root user with rootPassword and each of users with a role
// that may read and write every key, then enables auth. From then on a
// client without a user's password is refused.
func EnableAuth(t testing.TB, m *Member, rootPassword string, users ...User) {
	t.Helper()
	cli := Client(t, m.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("etcdserver: enable auth: %s: %v", what, err)
		}
	}
	_, err := cli.RoleAdd(ctx, "root")
	step("add role root", err)
	_, err = cli.UserAdd(ctx, "root", rootPassword)
	step("add user root", err)
	_, err = cli.UserGrantRole(ctx, "root", "root")
	step("grant root", err)
	_, err = cli.RoleAdd(ctx, "readwrite")
	step("add role readwrite", err)
	// "\x00" to "\x00" is every key from the smallest on: all of them.
	_, err = cli.RoleGrantPermission(ctx, "readwrite", "\x00", "\x00", clientv3.PermissionType(clientv3.PermReadWrite))
	step("grant readwrite", err)
	for _, u := range users {
		_, err = cli.UserAdd(ctx, u.Name, u.Password)
		step("add user "+u.Name, err)
		_, err = cli.UserGrantRole(ctx, u.Name, "readwrite")
		step("grant "+u.Name, err)
	}
	_, err = cli.AuthEnable(ctx)
	step("enable", err)
}
