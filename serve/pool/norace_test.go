//go:build !race

package pool_test

const raceOn = false
