//go:build !race

package serve_test

const raceOn = false
