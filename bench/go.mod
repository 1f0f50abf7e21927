module github.com/dlockio/dlock/bench

go 1.26.0

require (
	github.com/bsm/redislock v0.9.4
	github.com/dlockio/dlock v0.0.0-00010101000000-000000000000
	github.com/dlockio/dlock/etcddriver v0.0.0-00010101000000-000000000000
	github.com/dlockio/dlock/zkdriver v0.0.0-00010101000000-000000000000
	github.com/go-redsync/redsync/v4 v4.17.0
	github.com/go-zookeeper/zk v1.0.4
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redis/rueidis v1.0.80
	go.etcd.io/etcd/client/v3 v3.7.3
	go.uber.org/zap v1.28.0
	google.golang.org/grpc v1.85.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/coreos/go-semver v0.3.1 // indirect
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.29.0 // indirect
	go.etcd.io/etcd/api/v3 v3.7.3 // indirect
	go.etcd.io/etcd/client/pkg/v3 v3.7.3 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
