// Package tests holds the integration tests that span packages: placement
// conformance against llama.cpp of the same pin, loads on every backend,
// RPC topologies and GPU runners. They use real backends only.
package tests
