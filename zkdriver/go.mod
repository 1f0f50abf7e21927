module github.com/dlockio/dlock/zkdriver

go 1.26.0

require github.com/dlockio/dlock v0.0.0-00010101000000-000000000000

require github.com/go-zookeeper/zk v1.0.4
