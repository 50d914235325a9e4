// Package iptables stands in for sigs.k8s.io/iptables-wrappers/pkg/iptables, which the 1.38 kubelet
// imports (pkg/kubelet/kubelet_network_linux.go) and the Go module proxy does not serve. It has only the
// names that file uses, and it finds no iptables: NewBestEffort returns no clients, so a kubelet that asks
// logs "No iptables support on this system" and goes on. A hollow node never asks anyway (its
// configuration turns makeIPTablesUtilChains off: it must not change the host's firewall), so nothing
// here runs; it is what lets pkg/kubelet compile. The release modules take it by a replace
// (hack/cluster/new-release.sh) only for a release that requires this module.
package iptables

import (
	"context"
	"time"
)

// Mode says how a client picks between iptables-legacy and iptables-nft.
type Mode int

const (
	// UseInstalledMode uses whichever iptables the host has installed.
	UseInstalledMode Mode = iota
	// DetectHostMode looks at the rules already on the host.
	DetectHostMode
)

type (
	// Table is an iptables table (filter, nat, mangle).
	Table string
	// Chain is a chain in a table.
	Chain string
	// RulePosition is where EnsureRule puts a missing rule.
	RulePosition string
	// Protocol is IPv4 or IPv6.
	Protocol string
	// Family names an IP family in NewBestEffort's answer.
	Family string
)

const (
	TableFilter Table        = "filter"
	TableNAT    Table        = "nat"
	TableMangle Table        = "mangle"
	ChainInput  Chain        = "INPUT"
	ChainOutput Chain        = "OUTPUT"
	Prepend     RulePosition = "-I"
	Append      RulePosition = "-A"
)

// Interface is the part of an iptables client the kubelet calls.
type Interface interface {
	EnsureChain(ctx context.Context, table Table, chain Chain) (bool, error)
	EnsureRule(ctx context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error)
	IsIPv6() bool
	Protocol() Protocol
	Monitor(ctx context.Context, canary Chain, tables []Table, reload func(), interval time.Duration)
}

// NewBestEffort returns a client per IP family whose iptables works: none here.
func NewBestEffort(_ context.Context, _ Mode) map[Family]Interface {
	return map[Family]Interface{}
}
