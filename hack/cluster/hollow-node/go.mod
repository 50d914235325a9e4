module vpa.local/hack/cluster/hollow-node

go 1.26.0
