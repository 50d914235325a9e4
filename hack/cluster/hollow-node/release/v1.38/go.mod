module vpa.local/hack/cluster/hollow-node/release

go 1.26.0
