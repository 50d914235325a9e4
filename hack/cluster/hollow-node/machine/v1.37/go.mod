module vpa.local/hack/cluster/hollow-node/machine

go 1.26.0
